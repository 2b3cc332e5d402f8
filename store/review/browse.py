"""The moderators' view of the review queue: pending items in queue order, filtered, and the one after (or before) a
given item.

Oldest first, because an item that waits longest is the most overdue for its client; but one account's flood must
never hide another account's items. So the queue reads each account's own pending-ids index (store/redis_keys.py),
in one of two orders (store/review/queue_order.py):

- an account filter, and a moderator's scope (the accounts an operator assigned them): those accounts' queues merged,
  oldest first;
- an operator's queue without an account filter: round by round over every account with pending items, the one that
  has waited longest first: each account's oldest item, then each one's second oldest, and so on. Every account's
  oldest item is on the first page (of the first 50 accounts). "Decide and next" goes on to the next account's oldest
  item, and round the accounts again after the last one.

Items queued before these indexes existed are added to them by one walk, on the first read
(store/review/lua.py ADD_OLD_PENDING_ITEMS), the only write here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.review import lua
from store.review.queue import review_item_of
from store.review.queue_order import OldestFirst, Position, RoundRobin
from policy.types import ReviewItem

_PAGE = 200
# The most pending items one listing reads while it filters: a filter that matches nothing costs a bounded walk.
MAX_SCANNED = 5_000
# The most accounts the operators' queue goes round: those that have waited longest.
MAX_ACCOUNTS = 1_000
# Old items the walk adds per call (ADD_OLD_PENDING_ITEMS): each call decodes this many items inside the store.
_OLD_ITEMS_PER_CALL = 200


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
        """The accounts whose queues to merge, or None for every account's, round by round."""
        if self.account:
            return [self.account] if self.scope is None or self.account in self.scope else []
        return sorted(self.scope) if self.scope is not None else None


class ReviewBrowser:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._add_old = redis.register_script(lua.ADD_OLD_PENDING_ITEMS)
        self._old_items_added = False

    async def _add_old_items(self) -> None:
        while not self._old_items_added:
            self._old_items_added = bool(await self._add_old(
                keys=[redis_keys.review_by_status("pending"), redis_keys.review_pending_accounts(),
                      redis_keys.review_old_items_added()],
                args=[redis_keys.REVIEW_ITEM_PREFIX, redis_keys.REVIEW_PENDING_IDS_PREFIX, _OLD_ITEMS_PER_CALL],
            ))  # fmt: skip

    async def _order(self, queue_filter: QueueFilter) -> OldestFirst | RoundRobin:
        await self._add_old_items()
        accounts = queue_filter.accounts()
        if accounts is not None:
            return OldestFirst(self._redis, accounts)
        keyed = await self._redis.zrange(redis_keys.review_pending_accounts(), 0, MAX_ACCOUNTS - 1, withscores=True)
        return RoundRobin(self._redis, keyed)

    async def _pending_items(self, ids: list[int]) -> list[ReviewItem]:
        async with self._redis.pipeline(transaction=False) as pipe:
            for item_id in ids:
                pipe.hgetall(redis_keys.review_item(item_id))
            rows = await pipe.execute()
        # An item whose retention just ended may still be indexed: its hash is gone, so it is skipped.
        return [review_item_of(item_id, fields) for item_id, fields in zip(ids, rows) if fields.get("status") == "pending"]

    async def _item_and_seq(self, item_id: int) -> tuple[ReviewItem, float] | None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(redis_keys.review_item(item_id))
            pipe.zscore(redis_keys.review_all(), item_id)
            fields, seq = await pipe.execute()
        return (review_item_of(item_id, fields), seq) if fields and seq is not None else None

    async def _matching(
        self, order: OldestFirst | RoundRobin, queue_filter: QueueFilter, position: Position | None, limit: int,
        last_round: int | None = None, now: float | None = None,
    ) -> list[ReviewItem]:  # fmt: skip
        """The first `limit` pending items past `position` that match, in order, within MAX_SCANNED."""
        now = time.time() if now is None else now
        found: list[ReviewItem] = []
        scanned = 0
        while order and len(found) < limit and scanned < MAX_SCANNED:
            page = await order.after(position, _PAGE, last_round)
            if not page:
                break
            scanned += len(page)
            position = page[-1][0]
            found += [item for item in await self._pending_items([listed for _, listed in page])
                      if queue_filter.matches(item, now)]  # fmt: skip
        return found[:limit]

    async def pending(
        self, queue_filter: QueueFilter = QueueFilter(), *, limit: int = 50, now: float | None = None
    ) -> list[ReviewItem]:
        """The first `limit` matching pending items, in queue order."""
        return await self._matching(await self._order(queue_filter), queue_filter, None, limit, now=now)

    async def next_after(self, item_id: int, queue_filter: QueueFilter) -> ReviewItem | None:
        """The first matching pending item after `item_id`, decided or not (after a decision in an operator's queue,
        the next account's oldest: `RoundRobin.resume_after`), else the first from the start of the queue (the
        moderator has gone round)."""
        order = await self._order(queue_filter)
        found = await self._item_and_seq(item_id)
        starts = [await order.resume_after(*found)] if found else []
        for position, last_round in (*starts, (None, None)):
            for item in await self._matching(order, queue_filter, position, 1, last_round):
                if item.id != item_id:
                    return item
        return None

    async def previous_before(self, item_id: int, queue_filter: QueueFilter) -> ReviewItem | None:
        """The last matching pending item before `item_id` (the `k` key), within one page of the queue."""
        order, found = await self._order(queue_filter), await self._item_and_seq(item_id)
        if not order or found is None:
            return None
        page = await order.before(await order.position_of(*found), _PAGE)
        now = time.time()
        items = await self._pending_items([listed for _, listed in page])
        return next((item for item in items if queue_filter.matches(item, now)), None)

    async def report_count(self, account: str, reference: str | None) -> int:
        """The reports counted against the item's reference (0 once its counter has expired)."""
        if not reference:
            return 0
        return int(await self._redis.hget(redis_keys.report_counter(account, reference), "count") or 0)
