"""The human review queue and the content reports that feed it, in Redis.

An item is a hash: its immutable fields as one JSON `data` field, and `status` / `decided_at`
as plain fields, so the Lua scripts can check and change the status without parsing JSON. Its id is random
(`new_review_id`), so that an account learns nothing of other accounts' items from its own ids; the queue's order is
a creation sequence that only the store sees. Key schema: `store.redis_keys`. Scripts: `store.review.lua`.

What the store keeps is bounded by `ReviewRules`: a reference's report counter expires after its
last report, an account's reports and escalations per UTC day are capped (`ReportLimitExceeded`,
nothing counted), an account holds at most `pending_per_account` pending items (`ReviewQueueFull`,
nothing queued), a pending item is removed once its time is over and a decided one once its
retention is over, and a stored reference or image_url is at most `policy.types.MAX_FIELD_CHARS`
characters (`InvalidReviewField`), and a kept text at most `MAX_REVIEW_TEXT_CHARS` (its start). So one account can
fill at most `pending_per_account` items of at most ~9 KB each plus their text (docs/operating.md, Store memory).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel
from redis.asyncio import Redis

from store import redis_keys
from store.hash_bank.bank import MAX_ENTRIES_PER_ACCOUNT, decision_args
from store.labels import labels as label_store
from store.review import decision_counts, lua
from store.review.report_counters import COUNTERS_PER_ACCOUNT, ReportCounters
from store.webhooks.outbox import review_event_args
from policy.types import MAX_FIELD_CHARS, MAX_REVIEW_TEXT_CHARS, ContentKind, ReviewItem, ReviewReason

log = logging.getLogger("moderation.review")
DECISIONS = ("approved", "rejected")
# bank_rejected_hash's answer when the account's bank is full (store/hash_bank/lua.py).
_BANK_SKIPPED = -1
# How many ids `list` reads per round trip while it filters by a second criterion.
_LIST_PAGE = 200
# How many expired items each creation, decision (or prune) takes out of the indexes. Each of them
# adds at most one item to expire later, so pruning several per call never falls behind.
_PRUNE_PER_CALL = 16
DAY_S = 24 * 3600
# A review id is an integer (the spec's `review_id` and `GET /v1/review/{id}`) drawn at random from the 14-digit
# ones: it tells nothing about other items, yet it reaches webhooks and the hash bank exactly (the store's Lua writes
# numbers in JSON with 14 significant digits) and stays below 2^53 for JavaScript clients. Ids handed out before were
# a counter's, far below, so the two never meet.
_FIRST_ID, _ID_COUNT = 10**13, 9 * 10**13
# The creating scripts' answer when the id drawn is one the queue holds already: draw again (store/review/lua.py).
_ID_TAKEN = -1
_AUDITS_SPENT = -2
_REPORT_ID_TAKEN = 4
# Retry-After of `ReviewQueueFull`: room comes back when moderators decide pending items, which no
# clock predicts; a minute keeps a retrying client cheap without hiding room for long.
QUEUE_FULL_RETRY_AFTER_S = 60


@dataclass(frozen=True)
class ReviewRules:
    """How long the queue keeps what, and how much one account may add per day (docs/configuration.md, SECURITY.md)."""

    # A reference's report counter is forgotten this long after its last report.
    report_counter_ttl_s: int = 30 * DAY_S
    # Report counters one account keeps; past it its least recently reported references are forgotten first
    # (store/review/report_counters.py).
    report_counters_per_account: int = COUNTERS_PER_ACCOUNT
    # Reports one account may make per UTC day; the next one is refused (nothing counted).
    reports_per_account_per_day: int = 10_000
    # Review items one account's reports may create per UTC day; the report that would create one
    # more is refused (nothing counted) until the next day.
    escalations_per_account_per_day: int = 1_000
    # A decided item is kept this long after its decision, then removed.
    decided_retention_s: int = 30 * DAY_S
    # A pending item nobody decides is removed this long after it was queued.
    pending_retention_s: int = 30 * DAY_S
    # Pending items one account may hold, whatever queued them (model flags or reports); the next one is
    # refused (`ReviewQueueFull`) until moderators decide some or they expire. At ~9 KB for the largest item,
    # 10,000 is ~90 MB: a fifth of the embedded store's 512 MiB.
    pending_per_account: int = 10_000
    # Hashes one account's bank may hold (store/hash_bank/bank.py): a rejected image past it is not banked.
    hash_bank_max_entries: int = MAX_ENTRIES_PER_ACCOUNT
    # Audit items (a profile's `audit_rate`) one account may queue per UTC day; past it allowed content is not
    # audited until the next day (the answers are the same either way).
    audits_per_account_per_day: int = 1_000
    # The bounds of the labels a decision keeps (store/labels/labels.py).
    labels: label_store.LabelRules = field(default_factory=label_store.LabelRules)

    def __post_init__(self) -> None:
        if min(self.report_counter_ttl_s, self.decided_retention_s, self.pending_retention_s) < 1:
            raise ValueError("report_counter_ttl_s, decided_retention_s and pending_retention_s must be at least 1 s")
        if self.report_counters_per_account < 1:
            raise ValueError("report_counters_per_account must be at least 1")
        if min(self.reports_per_account_per_day, self.escalations_per_account_per_day, self.pending_per_account,
               self.hash_bank_max_entries, self.audits_per_account_per_day) < 0:
            raise ValueError("the caps must not be negative")


class DailyAuditsSpent(Exception):
    """The account queued its audits of the day (`ReviewRules.audits_per_account_per_day`): nothing was queued."""


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


class ReviewQueueFull(Exception):
    """The account already holds its cap of pending review items; nothing was queued.

    `retry_after_s`: when to look again (moderators deciding items makes room; no clock says when).
    """

    def __init__(self, cap: int):
        super().__init__(
            f"The account's review queue holds its limit of {cap} pending items; nothing was queued for review."
        )
        self.cap, self.retry_after_s = cap, QUEUE_FULL_RETRY_AFTER_S


class InvalidReviewField(ValueError):
    """A reference or image_url longer than the store keeps (`MAX_FIELD_CHARS`)."""


def _capped(name: str, value: str | None) -> str | None:
    if value is not None and len(value) > MAX_FIELD_CHARS:
        raise InvalidReviewField(f"'{name}' is longer than {MAX_FIELD_CHARS} characters.")
    return value


def new_review_id() -> int:
    return _FIRST_ID + secrets.randbelow(_ID_COUNT)


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
    pdq: str | None = None  # an image's PDQ hash (never the image), for the hash bank if the item is rejected
    text: str | None = None
    text_chars: int | None = None
    profile: str | None = None


def review_item_of(item_id: int, fields: dict[str, str]) -> ReviewItem:
    """An item from its hash in the store (the browser and the queue's numbers read items too)."""
    data = _ItemData.model_validate_json(fields["data"])
    decided_at = fields.get("decided_at")
    return ReviewItem(
        id=item_id,
        status=fields["status"],
        decided_at=float(decided_at) if decided_at is not None else None,
        decided_by=fields.get("decided_by") or None,
        reason_code=fields.get("reason_code") or None,
        **data.model_dump(),
    )


class ReviewQueue:
    def __init__(self, redis: Redis, rules: ReviewRules | None = None):
        self._redis = redis
        self.rules = rules or ReviewRules()
        self._create = redis.register_script(lua.CREATE_REVIEW_ITEM)
        self._report = redis.register_script(lua.REPORT)
        self._counters = ReportCounters(redis, self.rules.report_counters_per_account, self.rules.report_counter_ttl_s)
        self._decide = redis.register_script(lua.DECIDE_REVIEW_ITEM)
        self._prune = redis.register_script(lua.PRUNE_REVIEW_ITEMS)

    @staticmethod
    def _queue_keys() -> list[str]:
        # The layout of the scripts' queue keys (store/review/lua.py, _REVIEW_LAYOUT).
        return [
            redis_keys.review_sequence(),
            redis_keys.review_all(),
            *(redis_keys.review_by_status(status) for status in ("pending", *DECISIONS)),
            redis_keys.review_expiring(),
            redis_keys.review_pending_accounts(),
        ]

    @staticmethod
    def _queue_args(now: float) -> list:
        # The layout of the scripts' queue arguments (store/review/lua.py, _REVIEW_LAYOUT).
        return [
            redis_keys.REVIEW_ITEM_PREFIX, redis_keys.REVIEW_ACCOUNT_PREFIX, redis_keys.REVIEW_PENDING_ACCOUNT_PREFIX,
            repr(now), _PRUNE_PER_CALL, redis_keys.REVIEW_PENDING_IDS_PREFIX,
        ]  # fmt: skip

    def _new_item_args(self, account: str, data: _ItemData, now: float) -> tuple[list[str], list]:
        """KEYS after the queue's and ARGV after the queue's of a script that may create an item, with a new id."""
        expire_at = int(now + self.rules.pending_retention_s) + 1
        keys = [*self._queue_keys(), redis_keys.review_by_account(account), redis_keys.review_pending_of(account)]
        args = [*self._queue_args(now), account, data.model_dump_json(), expire_at, self.rules.pending_per_account,
                new_review_id()]  # fmt: skip
        return keys, args  # the scripts' webhook arguments (review_event_args) go after the caller's own

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
        now: float | None = None,
        pdq: str | None = None,
        text: str | None = None,
        profile: str | None = None,
        evidence: str | None = None,
    ) -> ReviewItem:
        """A pending item; raises ReviewQueueFull (nothing queued) when the account holds its cap of pending items,
        and, for an audit, DailyAuditsSpent when the account queued its audits of the day.

        `evidence`: a text item's label evidence (JSON: adaptation/labels.py), kept beside the item so that its
        decision keeps a label. It expires `rules.pending_retention_s` after `now` unless decided first."""
        now = time.time() if now is None else now
        data = _ItemData(
            account=account,
            reason=reason,
            kind=kind,
            reference=_capped("reference", reference),
            image_url=_capped("image_url", image_url),
            scores=scores,
            model_version=model_version,
            created_at=now,
            pdq=pdq,
            text=text[:MAX_REVIEW_TEXT_CHARS] if text is not None else None,
            text_chars=len(text) if text is not None else None,
            profile=profile,
        )
        day, day_counter_expires_at, _ = day_of(now)
        audit_cap = self.rules.audits_per_account_per_day if reason == "audit" else ""
        item_id = _ID_TAKEN
        while item_id == _ID_TAKEN:
            keys, args = self._new_item_args(account, data, now)
            item_id = int(await self._create(
                keys=[*keys, redis_keys.audits_on_day(account, day)],
                args=[*args, evidence or "", audit_cap, day_counter_expires_at, *review_event_args(now)],
            ))
        if item_id == 0:
            raise ReviewQueueFull(self.rules.pending_per_account)
        if item_id == _AUDITS_SPENT:
            raise DailyAuditsSpent()
        return ReviewItem(id=item_id, status="pending", **data.model_dump())

    async def get(self, item_id: int, account: str | None = None) -> ReviewItem | None:
        """With `account`, another account's item is None: accounts never see each other's items."""
        fields = await self._redis.hgetall(redis_keys.review_item(item_id))
        if not fields:
            return None
        item = review_item_of(item_id, fields)
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
                    found.append(review_item_of(int(item_id), fields))
        return found[:limit]

    async def decide(
        self,
        item_id: int,
        status: Literal["approved", "rejected"],
        now: float | None = None,
        *,
        decided_by: str = "",
        reason_code: str = "",
    ) -> ReviewItem:
        """pending -> approved | rejected, once. Raises ReviewItemNotFound or ReviewAlreadyDecided.

        The decided item expires `rules.decided_retention_s` after `now`; the items whose time is over by
        `now` leave the indexes first.
        """
        if status not in DECISIONS:
            raise ValueError(f"a decision is one of {DECISIONS}, not {status!r}")
        now = time.time() if now is None else now
        expire_at = int(now + self.rules.decided_retention_s) + 1
        reply = await self._decide(
            keys=[redis_keys.review_item(item_id), *self._queue_keys()],
            args=[*self._queue_args(now), status, repr(now), item_id, expire_at, decided_by, reason_code,
                  *decision_args(self.rules.hash_bank_max_entries), *label_store.decision_args(self.rules.labels),
                  *review_event_args(now)],
        )
        outcome = reply[0]
        if outcome == "missing":
            raise ReviewItemNotFound(item_id)
        if outcome == "decided":
            raise ReviewAlreadyDecided(item_id)
        item = review_item_of(item_id, dict(zip(reply[2::2], reply[3::2])))
        if int(reply[1]) == _BANK_SKIPPED:
            log.warning("hash bank of %s holds its %d hashes: rejected item %d was not banked",
                        item.account, self.rules.hash_bank_max_entries, item_id)  # fmt: skip
        await decision_counts.count_decision(self._redis, now)
        return item

    async def prune(self, now: float | None = None) -> int:
        """Takes up to a batch of expired items (pending or decided) out of the indexes; returns how many."""
        now = time.time() if now is None else now
        return int(await self._prune(keys=self._queue_keys(), args=self._queue_args(now)))

    async def daily_reports(self, account: str, now: float | None = None) -> int:
        """The reports the account made in the UTC day of `now`: what its daily cap counts (the operators' page)."""
        day = day_of(time.time() if now is None else now)[0]
        return int(await self._redis.get(redis_keys.reports_on_day(account, day)) or 0)

    async def report(
        self, *, account: str, reference: str, image_url: str | None, threshold: int, now: float | None = None
    ) -> CountedReport:
        """Counts one report; the report that takes the count past `threshold` queues the content, once.

        Raises ReportLimitExceeded (nothing counted) when the account's reports, or its escalations,
        of the UTC day of `now` are at their cap, ReviewQueueFull (nothing counted) when the report would
        queue an item past the account's cap of pending items, and InvalidReviewField for an over-long field.
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
        refused = _REPORT_ID_TAKEN
        while int(refused) == _REPORT_ID_TAKEN:
            queue_keys, queue_args = self._new_item_args(account, data, now)
            count, review_id, refused = await self._report(
                keys=[
                    redis_keys.report_counter(account, reference),
                    redis_keys.reports_on_day(account, day),
                    redis_keys.escalations_on_day(account, day),
                    *queue_keys,
                ],
                args=[
                    *queue_args, threshold, rules.report_counter_ttl_s, day_counters_expire_at,
                    rules.reports_per_account_per_day, rules.escalations_per_account_per_day, *review_event_args(now),
                ],
            )  # fmt: skip
        if int(refused) == 1:
            raise ReportLimitExceeded("reports", rules.reports_per_account_per_day, rest_of_day_s)
        if int(refused) == 2:
            raise ReportLimitExceeded("escalations", rules.escalations_per_account_per_day, rest_of_day_s)
        if int(refused) == 3:
            raise ReviewQueueFull(rules.pending_per_account)
        await self._counters.track(account, reference)
        escalated = int(review_id) != 0
        return CountedReport(
            reference=reference,
            reports=int(count),
            escalated=escalated,
            review_id=int(review_id) if escalated else None,
        )
