"""The human review queue and the content reports that feed it, in Redis.

An item is a hash: its immutable fields as one JSON `data` field, and `status` / `decided_at`
as plain fields, so the Lua scripts can check and change the status without parsing JSON.
Key schema: `policy.redis_keys`. Scripts: `policy.lua`.

What the store keeps is bounded by `ReviewRules`: a reference's report counter expires after its
last report, an account's reports and escalations per UTC day are capped (`ReportLimitExceeded`,
nothing counted), a decided item is removed once its retention is over, and a stored reference
or image_url is at most `policy.types.MAX_FIELD_CHARS` characters (`InvalidReviewField`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel
from redis.asyncio import Redis

from policy import lua, redis_keys
from policy.types import MAX_FIELD_CHARS, ContentKind, ReviewItem, ReviewReason

DECISIONS = ("approved", "rejected")
# How many ids `list` reads per round trip while it filters by a second criterion.
_LIST_PAGE = 200
# How many expired decided items each decision (or prune) takes out of the indexes. Each decision
# adds one item to expire later, so pruning several per decision never falls behind.
_PRUNE_PER_CALL = 16
DAY_S = 24 * 3600


@dataclass(frozen=True)
class ReviewRules:
    """How long the queue keeps what, and how much one account may add per day (docs/configuration.md, SECURITY.md)."""

    # A reference's report counter is forgotten this long after its last report.
    report_counter_ttl_s: int = 30 * DAY_S
    # Reports one account may make per UTC day; the next one is refused (nothing counted).
    reports_per_account_per_day: int = 10_000
    # Review items one account's reports may create per UTC day; the report that would create one
    # more is refused (nothing counted) until the next day.
    escalations_per_account_per_day: int = 1_000
    # A decided item is kept this long after its decision, then removed.
    decided_retention_s: int = 30 * DAY_S

    def __post_init__(self) -> None:
        if self.report_counter_ttl_s < 1 or self.decided_retention_s < 1:
            raise ValueError("report_counter_ttl_s and decided_retention_s must be at least 1 second")
        if self.reports_per_account_per_day < 0 or self.escalations_per_account_per_day < 0:
            raise ValueError("the daily caps must not be negative")


class ReviewItemNotFound(LookupError):
    """No review item has this id."""


class ReviewAlreadyDecided(Exception):
    """The item is no longer pending; a decision is final."""


class ReportLimitExceeded(Exception):
    """The account's daily cap of reports (or of escalations by reports) is reached; nothing was counted.

    `retry_after_s` is the time until the next UTC day, when the caps start again.
    """

    def __init__(self, limit: Literal["reports", "escalations"], cap: int, retry_after_s: float):
        what = "reports" if limit == "reports" else "review items created by reports"
        super().__init__(f"The account's daily limit of {cap} {what} is reached; retry after 00:00 UTC.")
        self.limit, self.cap, self.retry_after_s = limit, cap, retry_after_s


class InvalidReviewField(ValueError):
    """A reference or image_url longer than the store keeps (`MAX_FIELD_CHARS`)."""


def _capped(name: str, value: str | None) -> str | None:
    if value is not None and len(value) > MAX_FIELD_CHARS:
        raise InvalidReviewField(f"'{name}' is longer than {MAX_FIELD_CHARS} characters.")
    return value


def day_of(now: float) -> tuple[str, int, float]:
    """The `YYYY-MM-DD` of `now` (UTC), the unix time its day counters expire, and the seconds left in it."""
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    day_start = datetime(moment.year, moment.month, moment.day, tzinfo=timezone.utc).timestamp()
    day_end = day_start + DAY_S
    return moment.strftime("%Y-%m-%d"), int(day_end) + DAY_S, day_end - now


@dataclass(frozen=True)
class CountedReport:
    """One report, counted: the reference's reports so far, and the review item they escalated to, if any."""

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
    def __init__(self, redis: Redis, rules: ReviewRules | None = None):
        self._redis = redis
        self.rules = rules or ReviewRules()
        self._create = redis.register_script(lua.CREATE_REVIEW_ITEM)
        self._report = redis.register_script(lua.REPORT)
        self._decide = redis.register_script(lua.DECIDE_REVIEW_ITEM)
        self._prune = redis.register_script(lua.PRUNE_REVIEW_ITEMS)

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
            reference=_capped("reference", reference),
            image_url=_capped("image_url", image_url),
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
        """Newest first. Walks the account index (else the status one) and filters by status if both are given.

        Items whose retention is over are pruned first; one still in an index is skipped.
        """
        await self.prune()
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

    @staticmethod
    def _decision_keys(item_id: int) -> list[str]:
        # The order DECIDE_REVIEW_ITEM and PRUNE_REVIEW_ITEMS expect.
        return [
            redis_keys.review_item(item_id),
            redis_keys.review_by_status("pending"),
            redis_keys.review_by_status("approved"),
            redis_keys.review_by_status("rejected"),
            redis_keys.review_all(),
            redis_keys.review_expiring(),
        ]

    def _prune_args(self, now: float) -> list:
        return [repr(now), _PRUNE_PER_CALL, redis_keys.REVIEW_ACCOUNT_PREFIX, redis_keys.REVIEW_ITEM_PREFIX]

    async def decide(
        self, item_id: int, status: Literal["approved", "rejected"], now: float | None = None
    ) -> ReviewItem:
        """pending -> approved | rejected, once. Raises ReviewItemNotFound or ReviewAlreadyDecided.

        The decided item expires `rules.decided_retention_s` after `now`; the items whose retention
        is over by `now` leave the indexes first.
        """
        if status not in DECISIONS:
            raise ValueError(f"a decision is one of {DECISIONS}, not {status!r}")
        now = time.time() if now is None else now
        expire_at = int(now + self.rules.decided_retention_s) + 1
        reply = await self._decide(
            keys=self._decision_keys(item_id),
            args=[status, repr(now), item_id, expire_at, *self._prune_args(now)],
        )
        outcome = reply[0]
        if outcome == "missing":
            raise ReviewItemNotFound(item_id)
        if outcome == "decided":
            raise ReviewAlreadyDecided(item_id)
        return _item(item_id, dict(zip(reply[1::2], reply[2::2])))

    async def prune(self, now: float | None = None) -> int:
        """Takes up to a batch of expired decided items out of the indexes; returns how many."""
        now = time.time() if now is None else now
        return int(await self._prune(keys=self._decision_keys(0), args=["", "", "", "", *self._prune_args(now)]))

    async def report(
        self, *, account: str, reference: str, image_url: str | None, threshold: int, now: float | None = None
    ) -> CountedReport:
        """Counts one report; the report that takes the count past `threshold` queues the content, once.

        Raises ReportLimitExceeded (nothing counted) when the account's reports, or its escalations,
        of the UTC day of `now` are at their cap, and InvalidReviewField for an over-long field.
        """
        now = time.time() if now is None else now
        data = _ItemData(
            account=account,
            reason="report_threshold",
            reference=_capped("reference", reference),
            image_url=_capped("image_url", image_url),
            created_at=now,
        )
        day, day_counters_expire_at, rest_of_day_s = day_of(now)
        rules = self.rules
        count, review_id, refused = await self._report(
            keys=[
                redis_keys.report_counter(account, reference),
                redis_keys.reports_on_day(account, day),
                redis_keys.escalations_on_day(account, day),
                *self._index_keys(account),
            ],
            args=[
                threshold, redis_keys.REVIEW_ITEM_PREFIX, data.model_dump_json(), rules.report_counter_ttl_s,
                day_counters_expire_at, rules.reports_per_account_per_day, rules.escalations_per_account_per_day,
            ],
        )  # fmt: skip
        if int(refused) == 1:
            raise ReportLimitExceeded("reports", rules.reports_per_account_per_day, rest_of_day_s)
        if int(refused) == 2:
            raise ReportLimitExceeded("escalations", rules.escalations_per_account_per_day, rest_of_day_s)
        escalated = int(review_id) != 0
        return CountedReport(
            reference=reference,
            reports=int(count),
            escalated=escalated,
            review_id=int(review_id) if escalated else None,
        )
