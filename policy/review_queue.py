"""The human review queue and the content reports that feed it, in Redis.

An item is a hash: its immutable fields as one JSON `data` field, and `status` / `decided_at`
as plain fields, so the Lua scripts can check and change the status without parsing JSON.
Key schema: `policy.redis_keys`. Scripts: `policy.lua`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel
from redis.asyncio import Redis

from policy import lua, redis_keys
from policy.types import ContentKind, ReviewItem, ReviewReason

DECISIONS = ("approved", "rejected")
# How many ids `list` reads per round trip while it filters by a second criterion.
_LIST_PAGE = 200


class ReviewItemNotFound(LookupError):
    """No review item has this id."""


class ReviewAlreadyDecided(Exception):
    """The item is no longer pending; a decision is final."""


@dataclass(frozen=True)
class ReportResult:
    reference: str
    reports: int
    escalated: bool
    review_id: int | None


class _ItemData(BaseModel):
    """What `data` holds: every field of a ReviewItem that never changes once it is queued."""

    account: str
    reason: ReviewReason
    kind: ContentKind | None = None
    reference: str | None = None
    image_url: str | None = None
    scores: dict[str, float] = {}
    model_version: str | None = None
    created_at: float


def _item(item_id: int, fields: dict[str, str]) -> ReviewItem:
    data = _ItemData.model_validate_json(fields["data"])
    decided_at = fields.get("decided_at")
    return ReviewItem(
        id=item_id,
        status=fields["status"],
        decided_at=float(decided_at) if decided_at is not None else None,
        **data.model_dump(),
    )


class ReviewQueue:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._create = redis.register_script(lua.CREATE_REVIEW_ITEM)
        self._report = redis.register_script(lua.REPORT)
        self._decide = redis.register_script(lua.DECIDE_REVIEW_ITEM)

    @staticmethod
    def _index_keys(account: str) -> list[str]:
        # The order CREATE_REVIEW_ITEM and REPORT expect.
        return [
            redis_keys.review_next_id(),
            redis_keys.review_all(),
            redis_keys.review_by_status("pending"),
            redis_keys.review_by_account(account),
        ]

    async def create(
        self,
        *,
        account: str,
        reason: ReviewReason,
        kind: ContentKind | None,
        reference: str | None,
        image_url: str | None,
        scores: dict[str, float],
        model_version: str | None,
    ) -> ReviewItem:
        data = _ItemData(
            account=account,
            reason=reason,
            kind=kind,
            reference=reference,
            image_url=image_url,
            scores=scores,
            model_version=model_version,
            created_at=time.time(),
        )
        item_id = await self._create(
            keys=self._index_keys(account), args=[redis_keys.REVIEW_ITEM_PREFIX, data.model_dump_json()]
        )
        return ReviewItem(id=int(item_id), status="pending", **data.model_dump())

    async def get(self, item_id: int, account: str | None = None) -> ReviewItem | None:
        """With `account`, another account's item is None: accounts never see each other's items."""
        fields = await self._redis.hgetall(redis_keys.review_item(item_id))
        if not fields:
            return None
        item = _item(item_id, fields)
        if account is not None and item.account != account:
            return None
        return item

    async def list(
        self, *, status: str | None = None, account: str | None = None, limit: int = 100
    ) -> list[ReviewItem]:
        """Newest first. Walks the account index (else the status one) and filters by status if both are given."""
        if account is not None:
            index = redis_keys.review_by_account(account)
        elif status is not None:
            index = redis_keys.review_by_status(status)
        else:
            index = redis_keys.review_all()
        found: list[ReviewItem] = []
        start = 0
        while len(found) < limit:
            ids = await self._redis.zrevrange(index, start, start + _LIST_PAGE - 1)
            if not ids:
                break
            start += len(ids)
            async with self._redis.pipeline(transaction=False) as pipe:
                for item_id in ids:
                    pipe.hgetall(redis_keys.review_item(int(item_id)))
                rows = await pipe.execute()
            for item_id, fields in zip(ids, rows):
                if fields and (status is None or fields["status"] == status):
                    found.append(_item(int(item_id), fields))
        return found[:limit]

    async def decide(self, item_id: int, status: Literal["approved", "rejected"]) -> ReviewItem:
        """pending -> approved | rejected, once. Raises ReviewItemNotFound or ReviewAlreadyDecided."""
        if status not in DECISIONS:
            raise ValueError(f"a decision is one of {DECISIONS}, not {status!r}")
        outcome = await self._decide(
            keys=[
                redis_keys.review_item(item_id),
                redis_keys.review_by_status("pending"),
                redis_keys.review_by_status(status),
            ],
            args=[status, repr(time.time()), item_id],
        )
        if outcome == "missing":
            raise ReviewItemNotFound(item_id)
        if outcome == "decided":
            raise ReviewAlreadyDecided(item_id)
        # A decided item never changes again, so reading it after the script is consistent.
        item = await self.get(item_id)
        assert item is not None
        return item

    async def report(self, *, account: str, reference: str, image_url: str | None, threshold: int) -> ReportResult:
        """Counts one report; the report that takes the count past `threshold` queues the content, once."""
        data = _ItemData(
            account=account, reason="report_threshold", reference=reference, image_url=image_url, created_at=time.time()
        )
        count, review_id = await self._report(
            keys=[redis_keys.report_counts(account), redis_keys.report_reviews(account), *self._index_keys(account)],
            args=[reference, threshold, redis_keys.REVIEW_ITEM_PREFIX, data.model_dump_json()],
        )
        escalated = int(review_id) != 0
        return ReportResult(
            reference=reference,
            reports=int(count),
            escalated=escalated,
            review_id=int(review_id) if escalated else None,
        )
