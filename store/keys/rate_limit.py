"""An API key's rate limit: every part of it is here or named here, and this module counts its refusals.

- The numbers: each plan's `rate_per_second` and `burst` (`Plan` in policy/types.py; the shipped plans in
  config/plans.yaml).
- The bucket: one token bucket per key in Redis (`RATE_BUCKET_PREFIX` in store/redis_keys.py), refilled at the plan's rate up to its
  burst and taken in one atomic step by the Lua function TAKE_RATE_TOKEN (store/keys/lua.py).
- The check: every authenticated request takes a token in the same Redis round trip that finds its key, plan and
  profile (the AUTHORIZE script, through `ConfigStore.authorize` in store/keys/config.py); a refused take spends
  nothing and answers how long until a token is free.
- The 429: `_caller` in serve_app/auth.py raises `RateLimited` (serve_app/errors.py: 429 `rate_limited` with
  Retry-After) and counts the refusal (`count_rate_refusal` in serve_app/services.py, `RateRefusals` below), which
  the operators' usage page shows.
- Beside it, not per key: a widget check also takes a token of its client address's bucket
  (`ADDRESS_RATE_PER_S` in policy/widget_tokens.py, WIDGET_AUTHORIZE in store/widget/lua.py), and HAProxy refuses a
  client address past its keyless or refused-key requests (`SourceLimits` in runtime/haproxy_rules.py).

Refusals are counted per account and UTC month in one small expiring counter, like the quota's (store/keys/quota.py),
so a flood of refusals costs one INCR each and no memory beyond the counter.
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
