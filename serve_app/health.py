"""What GET /healthz answers: a snapshot of the service's health, refreshed in the background, never per call.

`/healthz` needs no key, so anyone may call it as often as they like: a call must cost nothing. A check (one
small write to the store that expires, the store's used memory, and the loaded model versions of the
deployments) runs every `interval_s` in each ingress replica (`HealthMonitor.start`), and each call reads the
latest snapshot. A snapshot older than the loop can explain (the loop is not running, as in tests, or is
stuck) is refreshed once for all the calls waiting on it, never once per call.

The answer is true: 503 `store_unavailable` when the store refuses writes (every authenticated request takes a rate
token, a write, so none could be served), its message naming the cause (`store_refusal`: full, read-only or gone),
503 `inference_unavailable` when a model deployment does not answer. The used memory goes to a metric beside its
limit, and past the alert threshold a warning is logged; so is the store starting to refuse writes, and taking them
again (docs/operating.md, Store memory).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as StoreConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as StoreTimeoutError

from moderation.backends import ModelBackends
from store.health import probe_writes, used_memory

log = logging.getLogger("moderation.health")
MIB = 1024 * 1024


@dataclass(frozen=True)
class HealthRules:
    """How often the snapshot is refreshed, and the store memory watch (docs/configuration.md)."""

    # Seconds between two checks: how stale /healthz may be, and what it costs (a write and three deployment
    # calls per ingress replica per interval, whatever the rate of /healthz calls).
    interval_s: float = 2.0
    # Longest wait for the store or a deployment within a check; past it, that part is down.
    timeout_s: float = 5.0
    # The store's `maxmemory` (the embedded store's MODERATION_STORE_MAXMEMORY_MB), and the share of it past which
    # the memory watch alerts.
    memory_limit_bytes: int = 512 * MIB
    memory_alert_ratio: float = 0.8

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.timeout_s <= 0 or self.memory_limit_bytes < 1:
            raise ValueError("interval_s, timeout_s and memory_limit_bytes must be positive")
        if not 0 < self.memory_alert_ratio <= 1:
            raise ValueError("memory_alert_ratio must be in (0, 1]")


@dataclass(frozen=True)
class StoreMemory:
    used_bytes: int
    limit_bytes: int
    alert_ratio: float

    @property
    def alert(self) -> bool:
        return self.used_bytes >= self.alert_ratio * self.limit_bytes


def store_refusal(exc: BaseException) -> str:
    """Why the store refused the probe write, as /healthz says it."""
    if isinstance(exc, OutOfMemoryError):
        return ("The store is full: its used memory reached its maxmemory, and it evicts nothing, so it refuses every "
                "write. Reads still work and nothing stored is lost.")  # fmt: skip
    if isinstance(exc, ReadOnlyError):
        return "The store is read-only (a replica, or a failed disk) and refuses every write."
    if isinstance(exc, StoreConnectionError | StoreTimeoutError | OSError | asyncio.TimeoutError):
        return "The store does not answer (down or unreachable)."
    return f"The store refuses writes ({type(exc).__name__})."


@dataclass(frozen=True)
class HealthSnapshot:
    """`store_error`: why the store refused the probe write, a sentence naming the cause (None: it took it);
    `models`: the loaded versions (None: a deployment did not answer); `memory`: None when it could not be read;
    `taken_at`: time.monotonic()."""

    store_error: str | None
    models: dict[str, str] | None
    memory: StoreMemory | None
    taken_at: float


class HealthMonitor:
    def __init__(
        self,
        redis: Redis,
        backends: ModelBackends,
        rules: HealthRules | None = None,
        on_memory: Callable[[StoreMemory], None] | None = None,
    ):
        self._redis, self._backends = redis, backends
        self.rules = rules or HealthRules()
        self._on_memory = on_memory
        self._name = secrets.token_hex(8)  # this replica's probe key
        self._latest: HealthSnapshot | None = None
        self._refreshing: asyncio.Future | None = None
        self._loop_task: asyncio.Task | None = None
        self._alerting = False
        self.checks = 0  # how many checks ran (what the calls cost, in tests)

    def start(self) -> None:
        """Refresh in the background from now on, on the running event loop (the ingress replica's)."""
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None

    async def current(self) -> HealthSnapshot:
        """The latest snapshot; refreshed first (once, whoever waits) only when it is older than the loop explains."""
        latest = self._latest
        if latest is not None and time.monotonic() - latest.taken_at <= self._max_age():
            return latest
        return await self._refresh()

    def _max_age(self) -> float:
        looping = self._loop_task is not None and not self._loop_task.done()
        # A running loop refreshes every interval, a check taking up to the timeout; without one, the interval.
        return self.rules.interval_s + self.rules.timeout_s + 1 if looping else self.rules.interval_s

    async def _refresh(self) -> HealthSnapshot:
        loop = asyncio.get_running_loop()
        if self._refreshing is None or self._refreshing.done() or self._refreshing.get_loop() is not loop:
            self._refreshing = loop.create_task(self._check())
        return await asyncio.shield(self._refreshing)

    async def _run(self) -> None:
        while True:
            try:
                await self._refresh()
            except Exception:  # a check never raises by design; the loop must outlive a bug all the same
                log.exception("health check failed")
            await asyncio.sleep(self.rules.interval_s)

    async def _check(self) -> HealthSnapshot:
        (store_error, memory), models = await asyncio.gather(self._store(), self._models())
        snapshot = HealthSnapshot(store_error, models, memory, time.monotonic())
        if store_error != (self._latest.store_error if self._latest is not None else None):
            self._log_store_change(store_error)
        self._latest, self.checks = snapshot, self.checks + 1
        if memory is not None:
            self._watch(memory)
        return snapshot

    @staticmethod
    def _log_store_change(store_error: str | None) -> None:
        if store_error is None:
            log.info("the store takes writes again")
        else:
            log.warning("the store refuses writes: %s", store_error)

    async def _store(self) -> tuple[str | None, StoreMemory | None]:
        error = None
        try:
            await asyncio.wait_for(probe_writes(self._redis, self._name), self.rules.timeout_s)
        except (RedisError, OSError, asyncio.TimeoutError) as exc:
            error = store_refusal(exc)
        try:  # also when writes are refused: a full store still answers how full it is
            used = await asyncio.wait_for(used_memory(self._redis), self.rules.timeout_s)
        except (RedisError, OSError, asyncio.TimeoutError, KeyError, ValueError):
            return error, None
        return error, StoreMemory(used, self.rules.memory_limit_bytes, self.rules.memory_alert_ratio)

    async def _models(self) -> dict[str, str] | None:
        try:
            return await asyncio.wait_for(self._backends.model_versions(), self.rules.timeout_s)
        except Exception:  # any failure of a deployment is the same: not ready
            return None

    def _watch(self, memory: StoreMemory) -> None:
        if memory.alert and not self._alerting:
            log.warning("store memory %d MiB is at or past %d%% of its limit of %d MiB", memory.used_bytes // MIB,
                        round(memory.alert_ratio * 100), memory.limit_bytes // MIB)  # fmt: skip
        elif self._alerting and not memory.alert:
            log.info("store memory %d MiB is below the alert threshold again", memory.used_bytes // MIB)
        self._alerting = memory.alert
        if self._on_memory is not None:
            try:
                self._on_memory(memory)
            except Exception:  # a metric must never fail the check
                log.debug("store memory not recorded", exc_info=True)
