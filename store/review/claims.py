"""Who is working on which review item: a moderator who claims an item (the item page's Claim button, or deciding
it) holds it for a few minutes. Opening an item never claims it: a GET changes nothing.

A claim keeps two moderators from working the same item at once; it is a courtesy, not the guard on decisions:
a decision is final whoever holds the claim (ReviewQueue.decide answers ReviewAlreadyDecided to the second one).
Taking or renewing a claim is one script (store/review/lua.py CLAIM_REVIEW_ITEM), so two moderators claiming an item at
the same moment cannot both hold it. A claim expires by itself: a moderator who walks away frees the item.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.review import lua

CLAIM_S = 5 * 60


@dataclass(frozen=True)
class Claim:
    holder: str
    seconds_left: int


class Claims:
    def __init__(self, redis: Redis, claim_s: int = CLAIM_S):
        self._redis, self.claim_s = redis, claim_s
        self._claim = redis.register_script(lua.CLAIM_REVIEW_ITEM)

    async def claim(self, item_id: int, user: str) -> Claim:
        """The item's claim after trying: `user`'s (taken or renewed), or the other moderator's who holds it."""
        holder, left = await self._claim(keys=[redis_keys.review_claim(item_id)], args=[user, self.claim_s])
        return Claim(holder=holder, seconds_left=int(left))

    async def holder(self, item_id: int) -> str | None:
        return await self._redis.get(redis_keys.review_claim(item_id))

    async def holders(self, item_ids: list[int]) -> dict[int, str]:
        if not item_ids:
            return {}
        rows = await self._redis.mget([redis_keys.review_claim(item_id) for item_id in item_ids])
        return {item_id: holder for item_id, holder in zip(item_ids, rows) if holder is not None}

    async def release(self, item_id: int, user: str) -> None:
        """Frees the item if `user` holds it (after a decision). Not atomic: at worst a claim that just expired and
        was taken by someone else in between is freed early, which costs nothing since the item is decided."""
        if await self.holder(item_id) == user:
            await self._redis.delete(redis_keys.review_claim(item_id))
