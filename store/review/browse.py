"""The moderators' view of the review queue: pending items oldest first, filtered, and the one after a given item.

Reads the queue's indexes (store/redis_keys.py). Oldest first because an item that waits longest is the most
overdue for its client; ids are handed out in order, so an index's ascending ids are the queue's order.

An account filter, and a moderator's scope (the accounts an operator assigned them), read each account's own
pending-ids index, never the global one: behind one account's flood, another account's items are found at once.
Several accounts' indexes are merged by id. Items queued before that index existed are added to it on first read
(store/review/lua.py BACKFILL_PENDING_IDS), the only write here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.review import lua
from store.review.queue import review_item_of
from policy.types import ReviewItem

_PAGE = 200
# The most pending items one listing reads while it filters: a filter that matches nothing costs a bounded walk.
MAX_SCANNED = 5_000


@dataclass(frozen=True)
class QueueFilter:
    """Empty fields match everything. `category`: the item's highest-scoring category. `min_age_s`: at least this
    old. `reason`: model_flagged or report_threshold. `scope`: the accounts the viewer may see (None: every one,
    an operator's; empty: none, a moderator with no accounts)."""

    account: str = ""
    kind: str = ""
    category: str = ""
    reason: str = ""
    min_age_s: float = 0
    scope: frozenset[str] | None = None

    def matches(self, item: ReviewItem, now: float) -> bool:
        top = max(item.scores, key=item.scores.get) if item.scores else ""
        return (
            (self.scope is None or item.account in self.scope)
            and (not self.account or item.account == self.account)
            and (not self.kind or (item.kind or "report") == self.kind)
            and (not self.category or top == self.category)
            and (not self.reason or item.reason == self.reason)
            and now - item.created_at >= self.min_age_s
        )

    def accounts(self) -> list[str] | None:
        """The accounts whose own indexes to read, or None for the global pending index."""
        if self.account:
            return [self.account] if self.scope is None or self.account in self.scope else []
        return sorted(self.scope) if self.scope is not None else None


class ReviewBrowser:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._backfill = redis.register_script(lua.BACKFILL_PENDING_IDS)

    async def _indexes(self, queue_filter: QueueFilter) -> list[str]:
        accounts = queue_filter.accounts()
        if accounts is None:
            return [redis_keys.review_by_status("pending")]
        for account in accounts:
            await self._backfill(keys=[redis_keys.review_pending_of(account), redis_keys.review_pending_ids_of(account)])
        return [redis_keys.review_pending_ids_of(account) for account in accounts]

    async def _ids(self, indexes: list[str], bound: str, count: int, *, descending: bool = False) -> list[int]:
        """The first `count` ids past `bound` (a ZRANGEBYSCORE bound) of the indexes merged, in queue order (or
        reversed). The first `count` of a union lie within the first `count` of each member."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for index in indexes:
                if descending:
                    pipe.zrevrangebyscore(index, bound, "-inf", 0, count)
                else:
                    pipe.zrangebyscore(index, bound, "+inf", 0, count)
            rows = await pipe.execute()
        return sorted({int(item_id) for ids in rows for item_id in ids}, reverse=descending)[:count]

    async def _pending_items(self, ids: list[int]) -> list[ReviewItem]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for item_id in ids:
                pipe.hgetall(redis_keys.review_item(item_id))
            rows = await pipe.execute()
        # An item whose retention just ended may still be indexed: its hash is gone, so it is skipped.
        return [review_item_of(item_id, fields) for item_id, fields in zip(ids, rows) if fields.get("status") == "pending"]

    async def pending(
        self, queue_filter: QueueFilter = QueueFilter(), *, after_id: int = 0, limit: int = 50, now: float | None = None
    ) -> list[ReviewItem]:
        """Pending items with ids above `after_id` that match, oldest first."""
        now = time.time() if now is None else now
        indexes = await self._indexes(queue_filter)
        found: list[ReviewItem] = []
        scanned, lower = 0, f"({after_id}"
        while indexes and len(found) < limit and scanned < MAX_SCANNED:
            ids = await self._ids(indexes, lower, _PAGE)
            if not ids:
                break
            scanned += len(ids)
            lower = f"({ids[-1]}"
            found += [item for item in await self._pending_items(ids) if queue_filter.matches(item, now)]
        return found[:limit]

    async def next_after(
        self, item_id: int, queue_filter: QueueFilter, skip: frozenset[int] = frozenset()
    ) -> ReviewItem | None:
        """The first matching pending item after `item_id` not in `skip`, else the first from the start of the
        queue (the moderator has gone round)."""
        for after in (item_id, 0):
            for item in await self.pending(queue_filter, after_id=after, limit=len(skip) + 1):
                if item.id not in skip and item.id != item_id:
                    return item
        return None

    async def previous_before(self, item_id: int, queue_filter: QueueFilter) -> ReviewItem | None:
        """The last matching pending item before `item_id` (the `k` key), within one page of the queue."""
        indexes = await self._indexes(queue_filter)
        ids = await self._ids(indexes, f"({item_id}", _PAGE, descending=True) if indexes else []
        now = time.time()
        return next((item for item in await self._pending_items(ids) if queue_filter.matches(item, now)), None)

    async def report_count(self, account: str, reference: str | None) -> int:
        """The reports counted against the item's reference (0 once its counter has expired)."""
        if not reference:
            return 0
        return int(await self._redis.hget(redis_keys.report_counter(account, reference), "count") or 0)
