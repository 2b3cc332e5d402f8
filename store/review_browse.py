"""The moderators' view of the review queue: pending items oldest first, filtered, and the one after a given item.

Reads the queue's indexes (store/redis_keys.py) and never writes. Oldest first because an item that waits longest
is the most overdue for its client; ids are handed out in order, so the pending index's ascending ids are the
queue's order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.review_queue import review_item_of
from policy.types import ReviewItem

_PAGE = 200
# The most pending items one listing reads while it filters: a filter that matches nothing costs a bounded walk.
MAX_SCANNED = 5_000


@dataclass(frozen=True)
class QueueFilter:
    """Empty fields match everything. `category`: the item's highest-scoring category. `min_age_s`: at least this
    old. `reason`: model_flagged or report_threshold."""

    account: str = ""
    kind: str = ""
    category: str = ""
    reason: str = ""
    min_age_s: float = 0

    def matches(self, item: ReviewItem, now: float) -> bool:
        top = max(item.scores, key=item.scores.get) if item.scores else ""
        return (
            (not self.account or item.account == self.account)
            and (not self.kind or (item.kind or "report") == self.kind)
            and (not self.category or top == self.category)
            and (not self.reason or item.reason == self.reason)
            and now - item.created_at >= self.min_age_s
        )


class ReviewBrowser:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def pending(
        self, queue_filter: QueueFilter = QueueFilter(), *, after_id: int = 0, limit: int = 50, now: float | None = None
    ) -> list[ReviewItem]:
        """Pending items with ids above `after_id` that match, oldest first."""
        now = time.time() if now is None else now
        found: list[ReviewItem] = []
        scanned, lower = 0, f"({after_id}"
        while len(found) < limit and scanned < MAX_SCANNED:
            ids = await self._redis.zrangebyscore(redis_keys.review_by_status("pending"), lower, "+inf", 0, _PAGE)
            if not ids:
                break
            scanned += len(ids)
            lower = f"({ids[-1]}"
            async with self._redis.pipeline(transaction=False) as pipe:
                for item_id in ids:
                    pipe.hgetall(redis_keys.review_item(int(item_id)))
                rows = await pipe.execute()
            for item_id, fields in zip(ids, rows):
                # An item whose retention just ended may still be indexed: its hash is gone, so it is skipped.
                if fields and fields.get("status") == "pending":
                    item = review_item_of(int(item_id), fields)
                    if queue_filter.matches(item, now):
                        found.append(item)
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
        pending = redis_keys.review_by_status("pending")
        ids = await self._redis.zrevrangebyscore(pending, f"({item_id}", "-inf", 0, _PAGE)
        now = time.time()
        for candidate in ids:
            fields = await self._redis.hgetall(redis_keys.review_item(int(candidate)))
            item = review_item_of(int(candidate), fields) if fields and fields.get("status") == "pending" else None
            if item is not None and queue_filter.matches(item, now):
                return item
        return None

    async def report_count(self, account: str, reference: str | None) -> int:
        """The reports counted against the item's reference (0 once its counter has expired)."""
        if not reference:
            return 0
        return int(await self._redis.hget(redis_keys.report_counter(account, reference), "count") or 0)
