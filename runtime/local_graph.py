"""The whole graph on this machine, for the end-to-end tests and the benchmarks.

An embedded store, a local token-authenticated Ray instance and serve_config.yaml deployed
on a free loopback port, and, given an admin token, the admin API on a listener of its own;
everything is stopped on exit with serve.shutdown() and ray.shutdown()
(never `ray stop`, which would hit other Ray work on the machine).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runtime.admin_server import AdminServer
from runtime.embedded_store import EmbeddedStore, free_port  # free_port: the tests and bench take it from here
from runtime.haproxy import remove_fallback_dir
from runtime.ray_cluster import remove_ray_temp_dir, start_local_ray
from runtime.settings import PROJECT_ROOT, Settings
from runtime.store_supervisor import StoreSupervisor


@dataclass(frozen=True)
class LocalGraph:
    base_url: str
    config: dict
    redis_url: str
    admin_url: str | None  # the admin API's own listener, when an admin token was given
    store: EmbeddedStore | None = None  # the embedded store, for tests that kill it
    supervisor: StoreSupervisor | None = None  # restarts the store when it dies, as under `make serve`


@contextmanager
def local_graph(
    workdir: Path,
    *,
    env_vars: dict[str, str] | None = None,
    admin_token: str | None = None,
    num_cpus: int = 2,
    timeout_s: float = 600,
    haproxy: bool | None = None,
) -> Iterator[LocalGraph]:
    """The graph of serve_config.yaml on one Ray node, with an embedded store (and an admin listener with
    `admin_token`), as `make serve` runs it."""
    import ray
    from ray import serve

    from runtime.deploy import deploy, read_serve_config, wait_until_running

    redis_server = EmbeddedStore(Path(workdir) / "redis")
    redis_url = redis_server.start()
    supervisor = StoreSupervisor(redis_server).start()
    port = free_port()
    config = read_serve_config(
        PROJECT_ROOT / "serve_config.yaml",
        host="127.0.0.1",
        port=port,
        redis_url=redis_server.url_without_password,
        redis_password_file=redis_server.password_path,
        env_vars=env_vars,
        # Read now, not from the cached get_settings(): the benchmark's without_cascade lever sets it per graph.
        text_cascade=Settings().text_cascade,
    )
    admin_server = None
    try:
        # None: as `make serve` would (MODERATION_HAPROXY, read now: the benchmark's levers set it).
        settings = Settings()
        use_haproxy = settings.haproxy if haproxy is None else haproxy
        start_local_ray(Path(workdir), num_cpus=num_cpus, log_to_driver=False, haproxy=use_haproxy,
                        source_limits=settings.source_limits())
        deploy(config)
        wait_until_running(timeout_s=timeout_s)
        base_url = f"http://127.0.0.1:{port}"
        require_healthy(base_url)
        if admin_token:
            admin_server = AdminServer(redis_url=redis_url, admin_token=admin_token, host="127.0.0.1", port=free_port())
            admin_server.start()
        admin_url = admin_server.url if admin_server else None
        yield LocalGraph(
            base_url=base_url, config=config, redis_url=redis_url, admin_url=admin_url, store=redis_server,
            supervisor=supervisor,
        )
    finally:
        if admin_server is not None:
            admin_server.stop()
        if ray.is_initialized():
            serve.shutdown()
            ray.shutdown()
        remove_fallback_dir(Path(workdir))
        remove_ray_temp_dir(Path(workdir))  # tests and benchmarks keep no Ray logs past their run
        supervisor.stop()
        redis_server.stop()


def require_healthy(base_url: str, timeout_s: float = 120) -> None:
    """`wait_until_healthy`, for tests and benchmarks: raise when /healthz never answered 200."""
    from runtime.deploy import wait_until_healthy  # runtime.deploy imports Ray: only where a graph runs

    if not wait_until_healthy(base_url, timeout_s):
        raise TimeoutError(f"{base_url} never became healthy")
