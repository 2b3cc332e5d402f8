"""The two orders in which the moderators' view walks pending items (store/review/browse.py). Both read the accounts'
pending-ids indexes, scored by each item's creation sequence (`seq`, which only the store sees; never its random id).

- `OldestFirst`: some accounts' queues merged, oldest first. A position is `(seq,)`.
- `RoundRobin`: every account with pending items, round by round: each account's oldest item (round 0), then each
  one's second oldest (round 1), and so on; within a round, the accounts in the order they began to wait (their
  score in `mod:review:pending-accounts`, `key` here: the sequence of the item that made the account join, which
  holds still while it has pending items). A position is `(round, key)`.

`after` gives the ids past a position in order, `before` the ones before it, nearest first. A position is computed at
the moment: deciding an account's item moves its later items one round up.
"""

from __future__ import annotations

import math

from redis.asyncio import Redis

from store import redis_keys
from policy.types import ReviewItem

Position = tuple[float, ...]
Placed = list[tuple[Position, int]]  # (position, item id), in order


class OldestFirst:
    def __init__(self, redis: Redis, accounts: list[str]):
        self._redis = redis
        self._indexes = [redis_keys.review_pending_ids_of(account) for account in accounts]

    def __bool__(self) -> bool:
        return bool(self._indexes)

    async def _read(self, position: Position | None, count: int, *, descending: bool) -> Placed:
        # The first `count` of the union lie within the first `count` of each index.
        async with self._redis.pipeline(transaction=False) as pipe:
            for index in self._indexes:
                if descending:
                    pipe.zrevrangebyscore(index, f"({position[0]!r}", "-inf", 0, count, withscores=True)
                else:
                    lower = "-inf" if position is None else f"({position[0]!r}"
                    pipe.zrangebyscore(index, lower, "+inf", 0, count, withscores=True)
            rows = await pipe.execute()
        placed = [((seq,), int(item_id)) for ids in rows for item_id, seq in ids]
        return sorted(placed, reverse=descending)[:count]

    async def after(self, position: Position | None, count: int, last_round: int | None = None) -> Placed:
        return await self._read(position, count, descending=False)

    async def before(self, position: Position, count: int) -> Placed:
        return await self._read(position, count, descending=True)

    async def position_of(self, item: ReviewItem, seq: float) -> Position:
        return (seq,)

    async def resume_after(self, item: ReviewItem, seq: float) -> tuple[Position, int | None]:
        """Where "next" goes on from: the item's place, decided or not."""
        return (seq,), None


class RoundRobin:
    def __init__(self, redis: Redis, accounts: list[tuple[str, float]]):
        """`accounts`: (account, key) in key order."""
        self._redis, self._accounts = redis, accounts
        self._keys = dict(accounts)

    def __bool__(self) -> bool:
        return bool(self._accounts)

    def _span(self, count: int) -> int:
        """How many rounds to read at once for about `count` items."""
        return -(-count // len(self._accounts))

    async def _rounds(self, first: int, count: int, accounts: list[tuple[str, float]]) -> Placed:
        """The accounts' items of rounds `first` to `first + count - 1`, unsorted."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for account, _ in accounts:
                pipe.zrange(redis_keys.review_pending_ids_of(account), first, first + count - 1)
            rows = await pipe.execute()
        return [((first + n, key), int(item_id))
                for (_, key), ids in zip(accounts, rows) for n, item_id in enumerate(ids)]  # fmt: skip

    async def after(self, position: Position | None, count: int, last_round: int | None = None) -> Placed:
        """The ids past `position`: the rest of its round (the accounts after its key), then whole rounds, up to round
        `last_round` when given."""
        at, key = position or (0, -math.inf)
        found = sorted(await self._rounds(int(at), 1, [entry for entry in self._accounts if entry[1] > key]))
        first, last = int(at) + 1, math.inf if last_round is None else last_round
        while len(found) < count and first <= last:
            span = min(self._span(count), last - first + 1)
            block = await self._rounds(first, span, self._accounts)
            if not block:
                break
            found += sorted(block)
            first += span
        return found[:count]

    async def before(self, position: Position, count: int) -> Placed:
        at, key = int(position[0]), position[1]
        found = sorted(await self._rounds(at, 1, [entry for entry in self._accounts if entry[1] < key]), reverse=True)
        last = at - 1
        while len(found) < count and last >= 0:
            first = max(0, last - self._span(count) + 1)
            found += sorted(await self._rounds(first, last - first + 1, self._accounts), reverse=True)
            last = first - 1
        return found[:count]

    async def position_of(self, item: ReviewItem, seq: float) -> Position:
        """Its round is how many pending items of its account are older (its rank, were it still pending)."""
        older = await self._redis.zcount(redis_keys.review_pending_ids_of(item.account), "-inf", f"({seq!r}")
        return older, self._keys.get(item.account, seq)

    async def resume_after(self, item: ReviewItem, seq: float) -> tuple[Position, int | None]:
        """Where "next" goes on from. After a pending item, its place. After a decided one, the oldest item of the next
        account (round 0 only; the caller goes round to the first account after the last): its account's later items
        have moved one round up, so walking on from its place would skip them."""
        if item.status == "pending":
            return await self.position_of(item, seq), None
        return (0, self._keys.get(item.account, seq)), 0
