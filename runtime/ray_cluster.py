"""The local Ray instance of `make serve`, the tests and the benchmarks: token-authenticated, on loopback.

Ray's own RPC ports run code for whoever reaches them, so the head binds 127.0.0.1 and
token authentication is on: the token is generated once, kept in a 0600 file under the
data dir and handed to Ray through RAY_AUTH_TOKEN_PATH (never through a runtime_env).
Secrets never travel in the replicas' runtime_env either: `replica_env` drops them. Nor in the environment Ray's
processes inherit from this one: `start_local_ray` removes them from it first (`SECRET_VARIABLES`; the settings were
read before, and the store's password travels as a 0600 file's path).

Ray's session files (its logs and Unix sockets) go to a private directory, not Ray's default `/tmp/ray`, which is
made 0777 for every user of the machine: `private_ray_temp_dir`.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from runtime.embedded_store import free_port
from runtime.haproxy import remove_recorded_dir, use_haproxy
from runtime.haproxy_rules import SourceLimits

LOOPBACK = "127.0.0.1"
# How long a stopping ingress replica keeps serving under Serve's direct ingress, so that HAProxy stops routing to it
# first. Ray's default, 30 s, is for load balancers outside the cluster; HAProxy here is on the same node and reloads
# in about a second, and every stop of `make serve` (Ctrl-C) waited the full 30 s. An operator's value is kept.
DRAIN_PERIOD_VARIABLE = "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"
# How often Serve's controller runs its loop (health, autoscaling, replica states): 0.1 s by default. Measured on the
# idle graph (2026-11-28, 15 s after 20 s of rest): the controller took 47 ms of CPU a second at 0.1 s and 15 at
# 0.5 s, the GCS 18 and 8; the whole graph 165 and 115 ms a second, 2.5% of a 2-core machine back for the models.
# Autoscaling waits 5 s before it acts (serve_config.yaml) and health checks run every 10 s, so half a second more
# to notice either changes nothing a client sees.
CONTROL_LOOP_VARIABLE = "RAY_SERVE_CONTROL_LOOP_INTERVAL_S"
CONTROL_LOOP_S = 0.5
# How long Serve's controller waits for a new proxy to say it is ready before it kills it: 5 s by default, counted
# from the actor's creation, so it covers the worker's start and HAProxy's launch (which Ray itself allows 30 s,
# RAY_SERVE_HAPROXY_STARTUP_TIMEOUT_S). On a busy 2-core machine that is not enough: the two-node end-to-end test's
# second proxy was killed this way twice on 2026-12-07 while the other half of `make test` started, and `serve.start`
# then fails outright. 30 s, HAProxy's own start limit; a proxy that is up answers at once, so nothing waits longer.
PROXY_READY_VARIABLE = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
PROXY_READY_S = 30
DRAIN_S = 5
# Ray's background loops that cost CPU a second whether or not requests come, each slowed to what this service needs.
# Measured on the idle graph (2026-11-29, two alternating starts of each, 30 s after 25 s of rest): the replicas, the
# controller, the dashboard agent and the log monitor took 84-94 ms of CPU a second with Ray's defaults and 67-68 with
# these, about 1% of a 2-core machine. An operator's own value is kept (`slow_idle_loops`).
IDLE_LOOPS = {
    # Serve's replicas and handles hand their cached request metrics to Ray's metric API every 100 ms by default;
    # Prometheus scrapes and Ray's own export run every few seconds, so once a second loses nothing.
    "RAY_SERVE_METRICS_EXPORT_INTERVAL_MS": "1000",
    # The log monitor globs the log directory on every 0.1 s pass while it holds fewer than this many files
    # (default 1,000); with 1, it globs every LOG_NAME_UPDATE_INTERVAL_S (0.5 s): a new replica's log is found
    # within half a second.
    "RAY_LOG_MONITOR_MANY_FILES_THRESHOLD": "1",
    # The dashboard agent's reporter walks every Ray process with psutil every 5 s by default, for the node
    # metrics (ray_node_*) that nothing here reads; the service's own metrics and Serve's are not from it.
    "REPORTER_UPDATE_INTERVAL_MS": "30000",
}
# Settings the replicas must not receive: the admin API runs in the runner, not in Ray.
SECRET_SETTINGS = frozenset({"MODERATION_ADMIN_TOKEN"})
# What no Ray process may inherit from the process that starts Ray: the admin token, and an external store's URL,
# which may carry its password (the replicas get the URL without it, and the password as a file: runtime/run.py).
SECRET_VARIABLES = SECRET_SETTINGS | {"REDIS_URL"}
# Ray's temp dir: a fresh mkdtemp directory each start, its path recorded under the data dir.
RAY_TEMP_RECORD = "ray-temp.path"
RAY_TEMP_PREFIX = "mod-ray-"


def ray_token_file(data_dir: Path) -> Path:
    """The token file under `data_dir`, created with a fresh random token the first time (mode 0600)."""
    path = Path(data_dir) / "ray" / "auth_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32))
    return path


def private_ray_temp_dir(data_dir: Path) -> Path:
    """A fresh directory for Ray's session files: mkdtemp's (mode 0700, a random name created atomically, so no other
    user can read the logs, reach the sockets or create it first), in the temp dir because Ray's socket paths under
    it must stay short (a Unix socket path holds 107 bytes). Its path is kept in `<data dir>/ray-temp.path`, and the
    directory an earlier start recorded there is removed first: the last run's logs stay until the next start."""
    data_dir = Path(data_dir).absolute()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    remove_ray_temp_dir(data_dir)
    fresh = Path(tempfile.mkdtemp(prefix=RAY_TEMP_PREFIX))
    (data_dir / RAY_TEMP_RECORD).write_text(str(fresh))
    return fresh


def remove_ray_temp_dir(data_dir: Path) -> None:
    """Removes the Ray temp dir an earlier start recorded under `data_dir`, if any."""
    remove_recorded_dir(data_dir, RAY_TEMP_RECORD, RAY_TEMP_PREFIX)


def start_local_ray(
    data_dir: Path,
    *,
    num_cpus: int,
    log_to_driver: bool,
    metrics_port: int | None = None,
    haproxy: bool = True,
    haproxy_stats_port: int | None = None,
    haproxy_metrics_port: int | None = None,
    source_limits: SourceLimits = SourceLimits(),
) -> None:
    """ray.init() for this machine only, with token authentication.

    `metrics_port`: where Ray's metrics agent serves Prometheus text (`/metrics`), Serve's metrics and the
    service's own (deployments/metrics.py) included; on loopback, like the node. None: a port Ray picks.
    `haproxy`: Serve's HAProxy ingress in front of the ingress replicas (runtime/haproxy.py: why, and what it
    exposes); its stats and exporter ports are free ones unless given, and `source_limits` are its per-address
    limits (runtime/haproxy_rules.py).
    Ray's session files go to `private_ray_temp_dir(data_dir)`.
    """
    import ray

    use_token_auth(data_dir)
    bind_to_loopback()
    use_serve_ingress(haproxy, haproxy_stats_port, haproxy_metrics_port, data_dir=data_dir, limits=source_limits)
    slow_idle_loops()
    drop_secrets_from_environment()
    # address="local": always a new instance of our own, never one that another program started on this machine.
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=log_to_driver,
        _node_ip_address=LOOPBACK,
        _metrics_export_port=metrics_port,
        # A directory inside the private one: Ray makes its temp dir 0777 itself, so the 0700 parent is the lock.
        _temp_dir=str(private_ray_temp_dir(data_dir) / "r"),
    )


def drop_secrets_from_environment(environ=os.environ) -> None:
    """Removes SECRET_VARIABLES from this process's environment, which every Ray process it starts inherits."""
    for name in SECRET_VARIABLES:
        environ.pop(name, None)


def use_serve_ingress(
    haproxy: bool,
    stats_port: int | None = None,
    metrics_port: int | None = None,
    *,
    data_dir: Path,
    limits: SourceLimits = SourceLimits(),
) -> None:
    """Serve's throughput mode, and its HAProxy ingress or not, for the Ray processes about to start.

    Both are read by every Ray process when it imports Serve, so they go in the environment they inherit.
    HAProxy's files go to a private directory under `data_dir` (runtime/haproxy.py private_run_dir).
    """
    if haproxy:
        use_haproxy(stats_port=stats_port or free_port(), metrics_port=metrics_port or free_port(),
                    fallback_port=free_port(), data_dir=data_dir, limits=limits)
    else:
        os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "0"  # not even one this process inherited
    # Serve's direct ingress and leaner replica threads. Measured by `make bench` beside the plain app: the excess
    # latency at one client fell from +30-63 ms to +10-28 ms on every workload, throughput at 16 clients rose on
    # three of four (docs/benchmarks.md).
    os.environ.setdefault("RAY_SERVE_THROUGHPUT_OPTIMIZED", "1")
    os.environ.setdefault(CONTROL_LOOP_VARIABLE, str(CONTROL_LOOP_S))
    os.environ.setdefault(PROXY_READY_VARIABLE, str(PROXY_READY_S))
    os.environ.setdefault(DRAIN_PERIOD_VARIABLE, str(DRAIN_S))


def slow_idle_loops(environ=os.environ) -> None:
    """IDLE_LOOPS for the Ray processes about to start (they read them from the environment they inherit), unless
    the operator set them."""
    for name, value in IDLE_LOOPS.items():
        environ.setdefault(name, value)


def bind_to_loopback() -> None:
    """Every Ray process of this instance listens on 127.0.0.1 only.

    On Linux, ray.init() turns a node address of 127.0.0.1 into the machine's address so that other nodes can
    reach it, and the GCS and raylets then listen there. Ray keeps loopback only where multi-node clusters are off,
    which this variable (named for the platforms where that is the default) switches for this process and its
    children; the constant is set too in case ray was imported before. A single-machine service needs no peers.
    """
    import ray._private.ray_constants as ray_constants

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def use_token_auth(data_dir: Path) -> None:
    """Token authentication for the Ray processes this process starts or joins (they inherit the environment)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(ray_token_file(data_dir))
    # Ray reads its config when first imported: a process that imported it before these variables
    # were set would start a token-mode cluster and then fail to present the token itself.
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def replica_env(environ: dict[str, str]) -> dict[str, str]:
    """The MODERATION_* settings the replicas read, without the secrets."""
    return {k: v for k, v in environ.items() if k.startswith("MODERATION_") and k not in SECRET_SETTINGS}


EXTERNAL_STORE_PASSWORD_FILE = "external-store.password"


def url_and_password_file(redis_url: str, data_dir: Path) -> tuple[str, Path | None]:
    """An external store's URL without its password, and the password in a 0600 file under `data_dir` (None when
    the URL has none): what may travel to the replicas, whose arguments end up in Ray's logs."""
    parts = urlsplit(redis_url)
    if parts.password is None:
        return redis_url, None
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = (f"{parts.username}@" if parts.username else "") + host + (f":{parts.port}" if parts.port else "")
    path = Path(data_dir) / EXTERNAL_STORE_PASSWORD_FILE
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(unquote(parts.password))  # as redis-py reads it from a URL
    return urlunsplit(parts._replace(netloc=netloc)), path
