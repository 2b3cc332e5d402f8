"""Rate-limit refusals (429 rate_limited) per account and UTC month, for the operators' usage page.

Counted by the ingress when it refuses a request for its key's rate (serve_app/auth.py). One small expiring counter
per account and month, like the quota's (store/keys/quota.py), so a flood of refusals costs one INCR each and no memory
beyond the counter.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from store import redis_keys
from store.keys.quota import month_of

# Kept a little past its month, like the quota counters, so last month's figure can still be read early in the next.
REFUSALS_TTL_S = 40 * 24 * 3600


class RateRefusals:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def count(self, account: str, now: float | None = None) -> None:
        key = redis_keys.rate_refusals(account, month_of(time.time() if now is None else now)[0])
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(key)
            pipe.expire(key, REFUSALS_TTL_S)
            await pipe.execute()

    async def this_month(self, account: str, now: float | None = None) -> int:
        key = redis_keys.rate_refusals(account, month_of(time.time() if now is None else now)[0])
        return int(await self._redis.get(key) or 0)
