"""The webhook worker as `make serve` runs it: a child process (runtime/webhook_worker.py), started again if it exits.

The store's password reaches it as a file path (as it reaches the replicas), never in its command line or
environment. A worker that exits is started again after a delay that doubles from 1 s up to 60 s while it keeps
exiting; nothing is lost meanwhile (the deliveries wait in the store). Stopped with SIGTERM, then killed if it hangs.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from runtime.settings import PROJECT_ROOT

log = logging.getLogger("moderation.webhooks")

POLL_S = 0.5
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
STOP_TIMEOUT_S = 10.0
# Removed from the child's environment: it gets the store as a URL without password and a password file.
_SECRETS = ("REDIS_URL", "MODERATION_ADMIN_TOKEN")


class WebhookWorkerProcess:
    def __init__(self, redis_url_without_password: str, password_file: Path | None):
        self._command = [sys.executable, "-m", "runtime.webhook_worker", "--redis-url", redis_url_without_password]
        if password_file is not None:
            self._command += ["--redis-password-file", str(password_file)]
        self._process: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="webhook-worker", daemon=True)
        self.restarts = 0

    def _spawn(self) -> None:
        env = {name: value for name, value in os.environ.items() if name not in _SECRETS}
        # A process group of its own (stopped as a group, never by a terminal's Ctrl-C before the runner stops it),
        # in the runner's session: whoever stops the runner's session stops it too.
        self._process = subprocess.Popen(self._command, cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL,
                                         process_group=0)  # fmt: skip

    def start(self) -> WebhookWorkerProcess:
        self._spawn()
        self._thread.start()
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _watch(self) -> None:
        backoff = FIRST_BACKOFF_S
        while not self._stopping.wait(POLL_S):
            if self._process is None or self._process.poll() is None:
                continue
            log.warning("the webhook worker exited (%s); starting it again in %.0f s", self._process.returncode,
                        backoff)  # fmt: skip
            if self._stopping.wait(backoff):
                return
            self._spawn()
            self.restarts += 1
            backoff = min(MAX_BACKOFF_S, backoff * 2)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        process = self._process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)  # its own session: only the worker
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
