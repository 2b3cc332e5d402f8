"""Decisions counted per UTC hour as they are made (ReviewQueue.decide), for the queue's decisions-per-hour figure
(store/review/stats.py): small expiring counters, so the rate costs two reads however long the queue's history."""

from __future__ import annotations

from datetime import datetime, timezone

from redis.asyncio import Redis

from store import redis_keys

HOUR_S = 3600
# An hour's counter is read for the last-hour rate during the next hour, then no more.
DECIDED_COUNTER_TTL_S = 2 * 24 * HOUR_S


def hour_of(now: float) -> str:
    return datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H")


async def count_decision(redis: Redis, now: float) -> None:
    key = redis_keys.review_decided_in_hour(hour_of(now))
    async with redis.pipeline(transaction=True) as pipe:
        pipe.incr(key)
        pipe.expire(key, DECIDED_COUNTER_TTL_S)
        await pipe.execute()
