"""`make serve`: Redis, Ray and the Serve graph, until Ctrl-C or SIGTERM.

Without REDIS_URL an embedded valkey-server (runtime.embedded_store) starts on loopback,
password-protected, with its AOF under MODERATION_DATA_DIR. Plans and profiles are seeded from config/ and, when the store
has no key, one is created for the default plan and profile and printed once. Ray runs on
loopback with token authentication (runtime.ray_cluster); with MODERATION_ADMIN_TOKEN set,
the admin API listens on its own loopback port in this process (runtime.admin_server), so
the token never reaches a replica. The embedded store is supervised (runtime.store_supervisor): if valkey-server
exits, it is started again with its data. Everything started here is stopped here, in reverse order.
Before any of it, runtime.preflight checks the ports and the transport, and refuses to start in one line.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading

from runtime.admin_server import AdminServer
from runtime.bootstrap import prepare_store
from runtime.embedded_store import EmbeddedStore
from runtime.haproxy import remove_fallback_dir
from runtime.store_supervisor import StoreSupervisor
from runtime.preflight import StartRefused, preflight
from runtime.ray_cluster import DRAIN_PERIOD_VARIABLE, DRAIN_S, replica_env, start_local_ray, url_and_password_file
from runtime.settings import Settings, get_settings
from runtime.webhook_process import WebhookWorkerProcess

log = logging.getLogger("moderation.run")


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM end the run wherever it is (start-up included) and go to clean-up.

    Installed after ray.init(), whose own handler would otherwise abort the process.
    """

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)


def _ignore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = get_settings()
    try:
        preflight(settings)  # before anything starts: a refusal leaves nothing running
    except StartRefused as refusal:
        print(f"Not starting: {refusal}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None

    redis_server = admin_server = supervisor = webhook_worker = None
    redis_url = settings.redis_url
    if redis_url is None:
        redis_server = EmbeddedStore(settings.data_dir / "redis", maxmemory_mb=settings.store_maxmemory_mb)
        redis_url = redis_server.start()  # carries the store's password: never logged or printed
        log.info("embedded valkey-server at %s (AOF in %s)", redis_server.redacted_url, redis_server.data_dir)
        supervisor = StoreSupervisor(redis_server).start()

    import ray
    from ray import serve

    try:
        first_key = asyncio.run(prepare_store(settings, redis_url))
        webhook_worker = _webhook_worker(settings, redis_url, redis_server)
        _start_graph(settings, redis_url, redis_server)
        print(f"\nModeration service ready at http://{settings.host}:{settings.port}", flush=True)
        print(f"Prometheus metrics at http://127.0.0.1:{settings.metrics_port}/metrics", flush=True)
        if settings.admin_token:
            admin_server = AdminServer.of_settings(settings, redis_url)
            print(f"Admin API at {admin_server.start()}", flush=True)
        if first_key:
            print(
                "\nFirst start: created an API key for plan "
                f"'{settings.default_plan}' and profile '{settings.default_profile}'.\n"
                f"It is shown only this once; keep it secret:\n\n    {first_key}\n",
                flush=True,
            )
        threading.Event().wait()
    except KeyboardInterrupt as stop:
        log.info("received %s", stop or "SIGINT")
    finally:
        _ignore_signals()  # a second Ctrl-C must not cut the clean-up short
        log.info("stopping")
        for started in (admin_server, webhook_worker):  # before the store they use
            if started is not None:
                started.stop()
        if supervisor is not None:
            supervisor.stop()  # before any stop of the store, which it would otherwise start again
        if ray.is_initialized() and not _shutdown_serve(serve) and redis_server is not None:
            # ray.shutdown() under a serve.shutdown() still running can end this process (Ray's core worker exits when
            # that thread touches it afterwards): the store, which holds what was accepted, is stopped cleanly first.
            redis_server.stop()
            redis_server = None
        if ray.is_initialized():
            ray.shutdown()  # stops the Ray processes this run started
        remove_fallback_dir(settings.data_dir)  # HAProxy's private dir, when it could not be under the data dir
        if redis_server is not None:
            redis_server.stop()
        log.info("stopped")


def _start_graph(settings: Settings, redis_url: str, redis_server: EmbeddedStore | None) -> None:
    """Ray on loopback, then serve_config.yaml deployed with this run's host, port and store; returns once running."""
    from runtime.deploy import deploy, read_serve_config, wait_until_healthy, wait_until_running

    replica_url, password_file = _store_for_children(settings, redis_url, redis_server)

    start_local_ray(
        settings.data_dir,
        num_cpus=os.cpu_count(),
        log_to_driver=True,
        metrics_port=settings.metrics_port,
        haproxy=settings.haproxy,
        haproxy_stats_port=settings.haproxy_stats_port,
        haproxy_metrics_port=settings.haproxy_metrics_port,
        source_limits=settings.source_limits(),
    )
    _stop_on_signals()
    deploy(
        read_serve_config(
            settings.serve_config,
            host=settings.host,
            port=settings.port,
            # The store's password goes by a 0600 file, not in the URL (Serve logs its arguments).
            redis_url=replica_url,
            redis_password_file=password_file,
            env_vars=replica_env(os.environ),  # the same settings as here, minus the secrets
        )
    )
    wait_until_running()
    # A wildcard bind is reached on loopback; an IPv6 address goes in brackets.
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    if not wait_until_healthy(f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"):
        log.warning("the graph is running but /healthz has not answered 200 within 60 s; see its body for why")


def _webhook_worker(settings: Settings, redis_url: str, redis_server: EmbeddedStore | None):
    """The webhook delivery worker's process, started before the graph so that the events of its first requests are
    delivered; None when MODERATION_WEBHOOK_WORKER is off (a worker runs elsewhere)."""
    if not settings.webhook_worker:
        return None
    return WebhookWorkerProcess(*_store_for_children(settings, redis_url, redis_server)).start()


def _store_for_children(settings: Settings, redis_url: str, redis_server: EmbeddedStore | None):
    """The store's URL without its password, and the 0600 file that holds it: what replicas and the worker get."""
    if redis_server is not None:
        return redis_server.url_without_password, redis_server.password_path
    return url_and_password_file(redis_url, settings.data_dir)


def _shutdown_serve(serve) -> bool:
    """serve.shutdown(), but never a hang; True when it finished.

    A signal sent to the whole process group (Ctrl-C in a terminal, `kill -- -PGID`) has already stopped part of Ray,
    and then serve.shutdown() would wait for a controller that is gone. Otherwise it takes as long as the ingress
    replicas' drain (runtime/ray_cluster.py DRAIN_S), so it gets that and some slack.
    """
    timeout_s = float(os.environ.get(DRAIN_PERIOD_VARIABLE, DRAIN_S)) + 15
    worker = threading.Thread(target=serve.shutdown, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("serve.shutdown() did not finish in %s s; stopping Ray directly", timeout_s)
    return not worker.is_alive()


if __name__ == "__main__":
    main()
