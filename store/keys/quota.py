"""Monthly quota (per account, UTC calendar month) and work in progress (per account) in Redis.

Checked and taken inside Redis by one Lua script (`store.keys.lua`), so concurrent requests, on
however many replicas, can never take more than there is. The same step takes the request's
slot of work in progress: an account holds at most its plan's `max_in_flight` moderation
requests past this point at once, counted across every ingress replica. The rate limit is not here: it is
taken by `ConfigStore.authorize` (`store.keys.config`), in the same Redis round trip that finds
the request's key, plan and profile.

Refunds, every part: a request's units go back when it fails (any Exception: invalid content, a 4xx, or our own
failure, a 5xx) and stay spent when the client hung up (a cancellation, not an Exception: the work was done).
- Decided in moderation/flow.py: `_Charged` around the units the flow takes itself, `first_unit_held` around a
  request whose first unit its admission took (serve_app/auth.py `admitted_caller`), `give_back_first_unit` for one
  refused after its admission (serve_app/auth.py `_caller`: a plan or profile it cannot read); `_give_back_units`
  logs a refund the store refused instead of failing the answer.
- Done here: `QuotaStore.give_back_quota`, to the month the units were taken from (`month_of` their time, even when
  the request straddled a month's end), by store/keys/lua.py `GIVE_BACK_QUOTA`, which a full store still lets
  through (`LET_THROUGH_WHEN_FULL`); the slot goes back whatever the outcome (`QuotaStore.release_slot`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from redis.asyncio import Redis

from store import redis_keys
from store.keys import lua

log = logging.getLogger("moderation.quota")

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


@dataclass(frozen=True)
class Admission:
    """A moderation request's first quota unit and its work slot, taken in the step that authorizes it
    (`ConfigStore.authorize`), so that one store round trip admits the request. `released`: (account, slot id) of
    this process's ended requests, given back in the same step (`QuotaStore.release_slot`)."""

    charged_at: float
    slot_id: str
    kind: str = ""  # "text" or "image": taken only when the key's plan covers it; "": either
    released: tuple[tuple[str, str], ...] = ()

    def script_args(self) -> list[str | float | int]:
        """The AUTHORIZE script's arguments past its fifth (store/keys/lua.py)."""
        month, expire_at = month_of(self.charged_at)
        released = [part for pair in self.released for part in pair]
        return ["admit", month, expire_at, redis_keys.QUOTA_PREFIX, redis_keys.WORK_IN_PROGRESS_PREFIX, self.slot_id,
                WORK_SLOT_LEASE_S, self.kind, *released]  # fmt: skip


def month_of(now: float) -> tuple[str, int]:
    """The `YYYY-MM` of `now` (UTC) and the unix time at which its quota counter may expire."""
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    month_end = datetime(year, month, 1, tzinfo=timezone.utc).timestamp()
    return moment.strftime("%Y-%m"), int(month_end) + QUOTA_KEPT_AFTER_MONTH_END_S


class QuotaStore:
    def __init__(self, redis: Redis):
        self._redis = redis
        self._take_quota = redis.register_script(lua.TAKE_QUOTA)
        self._give_back_quota = redis.register_script(lua.GIVE_BACK_QUOTA)
        # Slots of ended requests not given back yet, by account (`release_slot`), and the task giving them back.
        self._releasing: dict[str, list[str]] = {}
        self._releaser: asyncio.Task | None = None

    async def take(
        self, account: str, monthly_quota: int, now: float | None = None, units: int = 1, slot: WorkSlot | None = None
    ) -> Taken:
        """`units` of the month of `now` and, with `slot`, a place among the account's work in progress, in one
        step: all of it, or nothing and why."""
        month, expire_at = month_of(time.time() if now is None else now)
        keys, args = [redis_keys.quota(account, month)], [monthly_quota, expire_at, units]
        released: list[str] = []
        if slot is not None:
            keys.append(redis_keys.work_in_progress(account))
            released = self._releasing.pop(account, [])  # this account's ended requests: given back in the same step
            args += [slot.max_in_flight, slot.slot_id, WORK_SLOT_LEASE_S, *released]
        try:
            return Taken(int(await self._take_quota(keys=keys, args=args)))
        except BaseException:
            if released:
                self._releasing.setdefault(account, []).extend(released)
                self._start_releasing()
            raise

    def admission(self, slot_id: str, kind: str = "", now: float | None = None) -> Admission:
        """What a request's authorizing step needs to admit it as well; it carries every slot released so far, and
        `not_admitted` must follow should the step never run."""
        released = tuple((account, slot) for account, slots in self._releasing.items() for slot in slots)
        self._releasing = {}
        return Admission(charged_at=time.time() if now is None else now, slot_id=slot_id, kind=kind, released=released)

    def not_admitted(self, admission: Admission) -> None:
        """The step of `admission` failed before it ran: its released slots are given back another way."""
        for account, slot_id in admission.released:
            self._releasing.setdefault(account, []).append(slot_id)
        if admission.released:
            self._start_releasing()

    def release_slot(self, account: str, slot: WorkSlot) -> None:
        """Give the slot of an ended request back without the request waiting for it: the next request admitted in
        this process gives it back in its own step (`admission`, or the account's next `take`), or a task does as
        soon as the event loop is free, for every slot ended meanwhile in one round trip, whichever comes first.
        Should the store fail, the lease frees it."""
        self._releasing.setdefault(account, []).append(slot.slot_id)
        self._start_releasing()

    async def settled(self) -> None:
        """Wait until every slot released so far was given back (or failed to be): a replica's shutdown, and tests."""
        while self._releaser is not None and not self._releaser.done():
            await asyncio.shield(self._releaser)

    def _start_releasing(self) -> None:
        if self._releaser is None or self._releaser.done():
            self._releaser = asyncio.get_running_loop().create_task(self._give_back_released())

    async def _give_back_released(self) -> None:
        while self._releasing:
            batch, self._releasing = self._releasing, {}
            try:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for account, slot_ids in batch.items():
                        pipe.zrem(redis_keys.work_in_progress(account), *slot_ids)
                    await pipe.execute()
            except Exception as exc:  # the store is down: the slots' leases free them
                log.warning("could not give back %d slots: %s", sum(map(len, batch.values())), type(exc).__name__)

    async def in_flight(self, account: str) -> int:
        """Live slots of the account's work in progress (expired leases not counted; by this process's clock, which
        the script's Redis TIME matches on one machine: for tests and diagnostics, never for the decision)."""
        return await self._redis.zcount(redis_keys.work_in_progress(account), time.time(), "+inf")

    async def give_back_quota(self, account: str, now: float | None = None, units: int = 1) -> None:
        """For a request that failed (its content's 4xx, our 5xx): the account is not charged for it."""
        month, _ = month_of(time.time() if now is None else now)
        await self._give_back_quota(keys=[redis_keys.quota(account, month)], args=[units])

    async def quota_used(self, account: str, now: float | None = None) -> int:
        month, _ = month_of(time.time() if now is None else now)
        used = await self._redis.get(redis_keys.quota(account, month))
        return int(used) if used is not None else 0
