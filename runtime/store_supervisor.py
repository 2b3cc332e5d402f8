"""Keeps the embedded store running: notices valkey-server exited and starts it again, with backoff.

valkey-server exits on an AOF write error (a full disk) and can be killed (OOM killer, an operator's mistake);
before this, nothing started it again and every request answered 503 until someone restarted the service.

A thread of the process that owns the store (the runner, or the tests' local graph) polls the child every
`poll_s`; when it has exited, `EmbeddedStore.restart_if_died` starts it on the same port with the same data dir
and password files, so the clients' URL stays right and redis-py reconnects by itself on its next command. The AOF
is replayed: what the store acknowledged is there again. A restart that fails (the disk still full), or a store that
dies again within `STABLE_S` of its restart, is retried after a delay that doubles from `first_backoff_s` up to
`max_backoff_s`; each failure is logged.
"""

from __future__ import annotations

import logging
import threading
import time

from runtime.embedded_store import EmbeddedStore

log = logging.getLogger("moderation.store")

POLL_S = 0.2
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
# A store that dies again within this long of a restart is crash-looping: its next restart waits like a failed one.
STABLE_S = 10.0


class StoreSupervisor:
    def __init__(self, store: EmbeddedStore, *, poll_s: float = POLL_S, first_backoff_s: float = FIRST_BACKOFF_S,
                 max_backoff_s: float = MAX_BACKOFF_S):  # fmt: skip
        self.store = store
        self.poll_s, self.first_backoff_s, self.max_backoff_s = poll_s, first_backoff_s, max_backoff_s
        self.restarts = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-supervisor", daemon=True)

    def start(self) -> StoreSupervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops watching (before the store is stopped on purpose, so that stop is not taken for a death)."""
        self._stopping.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        failures, next_try_at = 0, 0.0
        last_start: float | None = None  # when the last restart succeeded; None after a failed one (or none yet)
        while not self._stopping.wait(self.poll_s):
            now = time.monotonic()
            if not self.store.died() or now < next_try_at:
                continue
            if last_start is not None:
                # Dead again soon after a restart (a crash loop) counts as a failed start; a later death starts afresh.
                failures = failures + 1 if now - last_start < STABLE_S else 0
            log.warning("the embedded store (pid %s) exited; starting it again (see %s)", self.store.pid,
                        self.store.log_path)  # fmt: skip
            try:
                if self.store.restart_if_died():
                    self.restarts += 1
                    last_start = time.monotonic()
                    log.warning("the embedded store is back (pid %s, restart %d)", self.store.pid, self.restarts)
            except Exception as exc:  # noqa: BLE001 - any failure to start is retried, never ends the watch
                failures, last_start = failures + 1, None
                log.error("the embedded store did not start again (%s); next try in %.1f s", exc,
                          self._backoff(failures))  # fmt: skip
            next_try_at = time.monotonic() + self._backoff(failures)

    def _backoff(self, failures: int) -> float:
        """No wait before the first try; then `first_backoff_s`, doubling up to `max_backoff_s`."""
        return 0.0 if failures == 0 else min(self.max_backoff_s, self.first_backoff_s * 2 ** (failures - 1))

    def __enter__(self) -> StoreSupervisor:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
