"""Monthly quota (per account, UTC calendar month) and work in progress (per account) in Redis.

Checked and taken inside Redis by one Lua script (`store.lua`), so concurrent requests, on
however many replicas, can never take more than there is. The same step takes the request's
slot of work in progress: an account holds at most its plan's `max_in_flight` moderation
requests past this point at once, counted across every ingress replica. The rate limit is not here: it is
taken by `ConfigStore.authorize` (`store.config`), in the same Redis round trip that finds
the request's key, plan and profile.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from redis.asyncio import Redis

from store import lua, redis_keys

# A month's counter stays readable this long after the month ends (billing, support questions).
QUOTA_KEPT_AFTER_MONTH_END_S = 35 * 24 * 3600
# A slot of work in progress frees itself after this long, should its request's replica die before giving it back:
# longer than any request may live (the server's deadline is 60 s).
WORK_SLOT_LEASE_S = 120


class Taken(Enum):
    TAKEN = 1
    NO_QUOTA = 0
    TOO_MANY_IN_FLIGHT = -1


@dataclass(frozen=True)
class WorkSlot:
    """One request's place among its account's work in progress: at most `max_in_flight` live at once."""

    slot_id: str
    max_in_flight: int


def month_of(now: float) -> tuple[str, int]:
    """The `YYYY-MM` of `now` (UTC) and the unix time at which its quota counter may expire."""
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    month_end = datetime(year, month, 1, tzinfo=timezone.utc).timestamp()
    return moment.strftime("%Y-%m"), int(month_end) + QUOTA_KEPT_AFTER_MONTH_END_S


class Limits:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._take_quota = redis.register_script(lua.TAKE_QUOTA)
        self._give_back_quota = redis.register_script(lua.GIVE_BACK_QUOTA)

    async def take(
        self, account: str, monthly_quota: int, now: float | None = None, units: int = 1, slot: WorkSlot | None = None
    ) -> Taken:
        """`units` of the month of `now` and, with `slot`, a place among the account's work in progress, in one
        step: all of it, or nothing and why."""
        month, expire_at = month_of(time.time() if now is None else now)
        keys, args = [redis_keys.quota(account, month)], [monthly_quota, expire_at, units]
        if slot is not None:
            keys.append(redis_keys.work_in_progress(account))
            args += [slot.max_in_flight, slot.slot_id, WORK_SLOT_LEASE_S]
        return Taken(int(await self._take_quota(keys=keys, args=args)))

    async def give_back_slot(self, account: str, slot: WorkSlot) -> None:
        await self._redis.zrem(redis_keys.work_in_progress(account), slot.slot_id)

    async def in_flight(self, account: str) -> int:
        """Live slots of the account's work in progress (expired leases not counted; by this process's clock, which
        the script's Redis TIME matches on one machine: for tests and diagnostics, never for the decision)."""
        return await self._redis.zcount(redis_keys.work_in_progress(account), time.time(), "+inf")

    async def give_back_quota(self, account: str, now: float | None = None, units: int = 1) -> None:
        """For a request that ended in a 5xx: the account is not charged for our failure."""
        month, _ = month_of(time.time() if now is None else now)
        await self._give_back_quota(keys=[redis_keys.quota(account, month)], args=[units])

    async def quota_used(self, account: str, now: float | None = None) -> int:
        month, _ = month_of(time.time() if now is None else now)
        used = await self._redis.get(redis_keys.quota(account, month))
        return int(used) if used is not None else 0
