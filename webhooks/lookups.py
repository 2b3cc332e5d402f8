"""The webhook sender's DNS lookups: a thread pool of their own, a share of it per account, and a hard time limit.

`socket.getaddrinfo` cannot be cancelled. A lookup whose nameserver never answers holds its thread until the system
resolver gives up, whatever the attempt's own time limit does: in the event loop's default pool (a handful of
threads) such lookups piled up, and every other account's lookups waited behind them until their attempts timed
out. Here a lookup runs in this pool and counts against its account until its thread is free again, not merely until
its attempt gave up; an account that already holds `per_account` threads gets no more (`LookupFailed` at once, a
`dns_error` retried on the schedule), and a lookup that has no answer within `timeout_s` fails (its thread is left to
finish on its own, still counted). So an account whose nameserver hangs holds at most `per_account` of the pool's
`threads`, and the others' lookups go on. `per_account` is the worker's share of one account's attempts
(runtime/webhook_worker.py): an account whose lookups all return never meets it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from webhooks import url_guard

# Threads of the pool (started as needed): 16 accounts whose nameservers never answer, at once, to fill it.
THREADS = 64
# Lookups of one account in flight at once, counted until their threads are free.
PER_ACCOUNT = 4
# A lookup with no answer by then fails: well inside an attempt's 15 s, so the attempt says why.
TIMEOUT_S = 5.0


class LookupFailed(Exception):
    """A lookup that gave no answer: refused because its account's share is busy, or past its time."""


class HostLookups:
    def __init__(self, *, threads: int = THREADS, per_account: int = PER_ACCOUNT, timeout_s: float = TIMEOUT_S):
        self.per_account, self.timeout_s = per_account, timeout_s
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="webhook-dns")
        self._held: Counter[str] = Counter()  # threads each account holds; given back from the threads themselves
        self._lock = threading.Lock()

    def held(self, account: str) -> int:
        with self._lock:
            return self._held[account]

    async def allowed_addresses(self, account: str, target: url_guard.WebhookTarget, *, allow_private: bool
                                ) -> list[str]:  # fmt: skip
        """`url_guard.allowed_addresses` within the account's share and the time limit; raises LookupFailed beside
        its UnsafeWebhookUrl and OSError."""
        with self._lock:
            if self._held[account] >= self.per_account:
                raise LookupFailed(
                    f"the account's {self.per_account} DNS lookups are all still waiting for a nameserver"
                )
            self._held[account] += 1
        try:
            lookup = self._pool.submit(url_guard.allowed_addresses, target, allow_private=allow_private)
        except RuntimeError:  # the pool is shut down: the worker is stopping
            self._give_back(account)
            raise
        lookup.add_done_callback(lambda _: self._give_back(account))
        try:
            # On time-out a lookup still queued is cancelled (and given back); one running keeps its thread.
            return await asyncio.wait_for(asyncio.wrap_future(lookup), self.timeout_s)
        except TimeoutError as exc:  # ours, or the resolver's own: either way no answer came
            raise LookupFailed(f"no DNS answer within {self.timeout_s:g} s") from exc

    def _give_back(self, account: str) -> None:
        with self._lock:
            self._held[account] -= 1
            if self._held[account] <= 0:
                del self._held[account]

    def close(self) -> None:
        """Lookups still queued are dropped; running ones end with their nameserver, and their threads with them."""
        self._pool.shutdown(wait=False, cancel_futures=True)

