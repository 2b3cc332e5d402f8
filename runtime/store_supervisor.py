"""Keeps the embedded store running: notices valkey-server exited and starts it again, with backoff.

valkey-server exits on an AOF write error (a full disk) and can be killed (OOM killer, an operator's mistake);
before this, nothing started it again and every request answered 503 until someone restarted the service.

A thread of the process that owns the store (the runner, or the tests' local graph) polls the child every
`poll_s`; when it has exited, `EmbeddedStore.restart_if_died` starts it on the same port with the same data dir
and password files, so the clients' URL stays right and redis-py reconnects by itself on its next command. The AOF
is replayed: what the store acknowledged is there again. A restart that fails (the disk still full) is retried
after a delay that doubles from `first_backoff_s` up to `max_backoff_s`, and each failure is logged.
"""

from __future__ import annotations

import logging
import threading

from runtime.embedded_store import EmbeddedStore

log = logging.getLogger("moderation.store")

POLL_S = 0.2
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0


def next_backoff(current_s: float, first_s: float = FIRST_BACKOFF_S, max_s: float = MAX_BACKOFF_S) -> float:
    return min(max_s, current_s * 2 if current_s else first_s)


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
        backoff_s = 0.0
        while not self._stopping.wait(backoff_s or self.poll_s):
            if not self.store.died():
                backoff_s = 0.0
                continue
            log.warning("the embedded store (pid %s) exited; starting it again (see %s)", self.store.pid,
                        self.store.log_path)  # fmt: skip
            try:
                if self.store.restart_if_died():
                    self.restarts += 1
                    log.warning("the embedded store is back (pid %s, restart %d)", self.store.pid, self.restarts)
                backoff_s = 0.0
            except Exception as exc:  # noqa: BLE001 - any failure to start is retried, never ends the watch
                backoff_s = next_backoff(backoff_s, self.first_backoff_s, self.max_backoff_s)
                log.error("the embedded store did not start again (%s); next try in %.1f s", exc, backoff_s)

    def __enter__(self) -> StoreSupervisor:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
