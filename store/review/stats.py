"""The review queue's health in numbers: pending items per account, the oldest pending item's age, decisions per
hour. Shown on the operators' dashboard page and exported as Prometheus metrics (admin/metrics.py).

Decisions are counted per UTC hour as they are made (ReviewQueue.decide), in small expiring counters, so the rate
costs two reads however long the queue's history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.review.decision_counts import HOUR_S, hour_of
from store.review.queue import review_item_of

# The most accounts the pending counts walk: the page and the metrics stay bounded whatever the store holds.
MAX_ACCOUNTS = 1_000


@dataclass(frozen=True)
class QueueHealth:
    pending_by_account: dict[str, int]
    oldest_pending_age_s: float  # 0 when nothing is pending
    decisions_last_hour: int  # this UTC hour's decisions plus the share of the previous hour still inside the hour


class QueueStats:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def health(self, now: float | None = None) -> QueueHealth:
        now = time.time() if now is None else now
        return QueueHealth(
            pending_by_account=await self._pending_by_account(now),
            oldest_pending_age_s=await self._oldest_pending_age_s(now),
            decisions_last_hour=await self._decisions_last_hour(now),
        )

    async def _pending_by_account(self, now: float) -> dict[str, int]:
        prefix = redis_keys.REVIEW_PENDING_ACCOUNT_PREFIX
        keys: list[str] = []
        async for key in self._redis.scan_iter(match=f"{prefix}*", count=500):
            keys.append(key)
            if len(keys) >= MAX_ACCOUNTS:
                break
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zcount(key, f"({now!r}", "+inf")  # as the pending cap counts them: items whose time is not over
            counts = await pipe.execute()
        return {key[len(prefix):]: int(count) for key, count in sorted(zip(keys, counts)) if int(count) > 0}

    async def _oldest_pending_age_s(self, now: float) -> float:
        # The lowest pending ids; one whose hash already expired is skipped.
        for item_id in await self._redis.zrange(redis_keys.review_by_status("pending"), 0, 9):
            fields = await self._redis.hgetall(redis_keys.review_item(int(item_id)))
            if fields:
                return max(0.0, now - review_item_of(int(item_id), fields).created_at)
        return 0.0

    async def _decisions_last_hour(self, now: float) -> int:
        this_hour, last_hour = await self._redis.mget(
            [redis_keys.review_decided_in_hour(hour_of(now)), redis_keys.review_decided_in_hour(hour_of(now - HOUR_S))]
        )
        into_hour = (now % HOUR_S) / HOUR_S
        return int(this_hour or 0) + round(int(last_hour or 0) * (1 - into_hour))
