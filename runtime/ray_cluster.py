"""The local Ray instance of `make serve`, the tests and the benchmarks: token-authenticated, on loopback.

Ray's own RPC ports run code for whoever reaches them, so the head binds 127.0.0.1 and
token authentication is on: the token is generated once, kept in a 0600 file under the
data dir and handed to Ray through RAY_AUTH_TOKEN_PATH (never through a runtime_env).
Secrets never travel in the replicas' runtime_env either: `replica_env` drops them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from runtime.embedded_store import free_port
from runtime.haproxy import use_haproxy

LOOPBACK = "127.0.0.1"
# Settings the replicas must not receive: the admin API runs in the runner, not in Ray.
SECRET_SETTINGS = frozenset({"MODERATION_ADMIN_TOKEN"})


def ray_token_file(data_dir: Path) -> Path:
    """The token file under `data_dir`, created with a fresh random token the first time (mode 0600)."""
    path = Path(data_dir) / "ray" / "auth_token"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(secrets.token_hex(32))
    return path


def start_local_ray(
    data_dir: Path,
    *,
    num_cpus: int,
    log_to_driver: bool,
    metrics_port: int | None = None,
    haproxy: bool = True,
    haproxy_stats_port: int | None = None,
    haproxy_metrics_port: int | None = None,
) -> None:
    """ray.init() for this machine only, with token authentication.

    `metrics_port`: where Ray's metrics agent serves Prometheus text (`/metrics`), Serve's metrics and the
    service's own (deployments/metrics.py) included; on loopback, like the node. None: a port Ray picks.
    `haproxy`: Serve's HAProxy ingress in front of the ingress replicas (runtime/haproxy.py: why, and what it
    exposes); its stats and exporter ports are free ones unless given.
    """
    import ray

    use_token_auth(data_dir)
    bind_to_loopback()
    use_serve_ingress(haproxy, haproxy_stats_port, haproxy_metrics_port)
    # address="local": always a new instance of our own, never one that another program started on this machine.
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=log_to_driver,
        _node_ip_address=LOOPBACK,
        _metrics_export_port=metrics_port,
    )


def use_serve_ingress(haproxy: bool, stats_port: int | None = None, metrics_port: int | None = None) -> None:
    """Serve's throughput mode, and its HAProxy ingress or not, for the Ray processes about to start.

    Both are read by every Ray process when it imports Serve, so they go in the environment they inherit.
    """
    if haproxy:
        use_haproxy(stats_port=stats_port or free_port(), metrics_port=metrics_port or free_port(),
                    fallback_port=free_port())
    else:
        os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "0"  # not even one this process inherited
    # Serve's direct ingress and leaner replica threads. Measured by `make bench` beside the plain app: the excess
    # latency at one client fell from +30-63 ms to +10-28 ms on every workload, throughput at 16 clients rose on
    # three of four (docs/benchmarks.md).
    os.environ.setdefault("RAY_SERVE_THROUGHPUT_OPTIMIZED", "1")


def start_two_node_cluster(data_dir: Path, *, cpus_per_node: int, haproxy: bool = True):
    """Two raylets on this machine, on loopback, with token authentication: the head (resource `ingress_node`)
    and a second node (resource `model_node`); `place_on_two_nodes` puts the deployments on them.

    For the benchmark's one-node / two-node comparison: the same cores split into two Ray nodes, so every model
    call crosses nodes as it would across machines. Returns the `ray.cluster_utils.Cluster` (call `shutdown()`).
    Loopback comes from the nodes' address here, not from `bind_to_loopback`, which would turn multi-node off.
    """
    import ray
    import ray._private.ray_constants as ray_constants
    from ray.cluster_utils import Cluster

    # A one-node graph started earlier in this process (the benchmark's) turned multi-node off: turn it back on.
    os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = True
    use_token_auth(data_dir)
    use_serve_ingress(haproxy)
    loopback = {"node_ip_address": LOOPBACK}
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**loopback, "include_dashboard": False, "num_cpus": cpus_per_node,
                        "resources": {"ingress_node": 1}},
    )
    cluster.add_node(**loopback, num_cpus=cpus_per_node, resources={"model_node": 1})
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster


# Deployment -> the node resource it is pinned to, and its CPU share there: the models' 0.4 x 2 replicas each
# would not fit one node of 1 CPU, so on two nodes each model replica takes 0.25 (4 x 0.25 = 1).
TWO_NODE_PLACEMENT = {
    "ModerationIngress": ("ingress_node", None),
    "Policy": ("ingress_node", None),
    "ImageModel": ("model_node", 0.25),
    "TextModel": ("model_node", 0.25),
}


def place_on_two_nodes(config: dict) -> dict:
    """The Serve config with the ingress and Policy on the head and both model deployments on the second node."""
    for entry in config["applications"][0]["deployments"]:
        resource, cpus = TWO_NODE_PLACEMENT[entry["name"]]
        options = entry.setdefault("ray_actor_options", {})
        options["resources"] = {resource: 0.01}
        if cpus is not None:
            options["num_cpus"] = cpus
    return config


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
