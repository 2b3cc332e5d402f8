"""The bound on password hashing in this process: at most `workers` scrypt hashes run at once, at most `max_waiting`
more wait, and a password check that finds both full is refused at once (`HashesBusy`) instead of queued.

Why: a scrypt hash (store/people/users.py) holds 128 MiB and a core for a tenth to half a second. Unbounded, a burst
of logins queued them all in the event loop's shared thread pool (100 simultaneous wrong passwords: all hashed, six
at a time, for 52 s, every other user of that pool waiting behind them). The login brakes (store/people/login_brake.py)
bound how many hashes one address or one name may start; this bounds all of them together.

Who waits and who is refused:
- `run_or_refuse`: checking a typed password (a login, the password form's current password). Anyone who reaches
  the listener may ask for one, so past the bound it is refused: `HashesBusy`, answered 503 with Retry-After (the same
  request succeeds once the queue drains, in a few hashes' time).
- `run_in_turn`: hashing a new password (a user's creation, a password change). Only an operator, or a user who
  just proved their password, asks for one, so it waits for its turn instead of failing; it still runs only on one
  of the `workers`, and it counts against the bound that refuses checks.
Threads, as in the decode pool (models/decode_pool.py): hashlib.scrypt releases the GIL while it works.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
# One hash per core of the 2-core reference box: a third would only wait for a core while holding its 128 MiB.
HASH_WORKERS = 2
# Checks that may wait for a worker: at about half a second a hash on the reference box, the last check let in waits
# about two seconds, well within a login page's patience, and queued checks hold no hash memory yet.
HASH_MAX_WAITING = 6
# What HashesBusy suggests as Retry-After: the queue drains in a few seconds at most.
RETRY_AFTER_S = 1


class HashesBusy(RuntimeError):
    """Every hash worker is taken and the queue is full: nothing was checked, the same request may be retried."""

    retry_after_s = RETRY_AFTER_S


class HashPool:
    """One per process (`PASSWORD_HASHES`): every UserStore of the process shares it unless given another."""

    def __init__(self, workers: int = HASH_WORKERS, max_waiting: int = HASH_MAX_WAITING):
        if workers < 1 or max_waiting < 0:
            raise ValueError("workers >= 1 and max_waiting >= 0 are required")
        self.workers, self.max_waiting = workers, max_waiting
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="password-hash")
        self._lock = threading.Lock()  # done-callbacks run on worker threads
        self._in_flight = 0  # running + waiting; released when the hash really ends, not when its caller leaves

    async def run_or_refuse(self, hash_fn: Callable[..., T], *args) -> T:
        """Raises HashesBusy, having run nothing, when `workers + max_waiting` hashes are running or waiting."""
        with self._lock:
            if self._in_flight >= self.workers + self.max_waiting:
                raise HashesBusy(f"{self._in_flight} password hashes in flight; the limit is reached")
            self._in_flight += 1
        return await self._run(hash_fn, *args)

    async def run_in_turn(self, hash_fn: Callable[..., T], *args) -> T:
        with self._lock:
            self._in_flight += 1
        return await self._run(hash_fn, *args)

    async def _run(self, hash_fn: Callable[..., T], *args) -> T:
        try:
            future = self._pool.submit(hash_fn, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        # A caller that leaves (a closed connection) cancels its hash only if it has not started.
        return await asyncio.wrap_future(future)

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._in_flight -= 1


PASSWORD_HASHES = HashPool()
