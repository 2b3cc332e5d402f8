"""The plain app: what a user would write instead of the graph.

The same FastAPI app (`serve_app.create_app`) with the models in its own process (`LocalBackends`, which scores in
`asyncio.to_thread`, so both cores can work), under ONE uvicorn worker in a subprocess, with the same settings as
the graph's ingress, its own embedded store and an admin listener for the keys. `python -m bench.plain` is that
subprocess; `plain_app()` starts and stops it.
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runtime.admin_server import AdminServer
from runtime.embedded_store import EmbeddedStore
from runtime.local_graph import free_port, require_healthy

REPO_ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_S = 15


@dataclass(frozen=True)
class PlainApp:
    base_url: str
    admin_url: str
    pid: int


@contextmanager
def plain_app(workdir: Path, *, admin_token: str, versions: dict[str, str], env: dict[str, str],
              profile_path: Path | None = None) -> Iterator[PlainApp]:
    """`env`: the replicas' environment from serve_config.yaml (one BLAS/OpenMP thread per call...). With
    `profile_path`, SIGUSR1 turns cProfile on in the app's event-loop thread and SIGUSR2 writes it there (bench.cpu)."""
    store = EmbeddedStore(Path(workdir) / "plain-redis")
    redis_url = store.start()
    admin = process = None
    try:
        admin = AdminServer(redis_url=redis_url, admin_token=admin_token, host="127.0.0.1", port=free_port())
        admin.start()
        port = free_port()
        # The store's URL (with its password) goes through the environment, never the command line.
        child_env = {**os.environ, **env, "BENCH_PLAIN_REDIS_URL": redis_url, "BENCH_PLAIN_PORT": str(port),
                     "BENCH_PLAIN_VERSIONS": json.dumps(versions), "BENCH_PLAIN_LOG": str(Path(workdir) / "plain.log"),
                     "BENCH_PLAIN_PROFILE": str(profile_path or "")}
        process = subprocess.Popen([sys.executable, "-m", "bench.plain"], cwd=REPO_ROOT, env=child_env)
        base_url = f"http://127.0.0.1:{port}"
        require_healthy(base_url)
        yield PlainApp(base_url, admin.url, process.pid)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if admin is not None:
            admin.stop()
        store.stop()


def _serve() -> None:
    import uvicorn

    from moderation.local_backends import LocalBackends
    from runtime.bootstrap import seed_config
    from runtime.settings import get_settings
    from serve_app.app import create_app
    from serve_app.services import Services

    # As the ingress replica does (deployments/ingress.py): INFO, so the access log is written here too, to a file.
    logging.basicConfig(filename=os.environ["BENCH_PLAIN_LOG"], level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = get_settings()
    redis_url, port = os.environ["BENCH_PLAIN_REDIS_URL"], int(os.environ["BENCH_PLAIN_PORT"])

    def services() -> Services:
        return Services.connect(
            redis_url,
            LocalBackends(json.loads(os.environ["BENCH_PLAIN_VERSIONS"])),
            inference_timeout_s=settings.inference_timeout_s,
            time_limits=settings.time_limits(),
            review_rules=settings.review_rules(),
        )

    # As the graph's ingress does at start: the shipped plans and profiles (on a client of its own event loop).
    asyncio.run(seed_config(Services.connect(redis_url, None).config, settings.config_dir))
    config = uvicorn.Config(create_app(services()), host="127.0.0.1", port=port, workers=1,
                            log_level="warning", access_log=False, lifespan="off")
    if os.environ.get("BENCH_PLAIN_PROFILE"):
        _profile_on_signals(Path(os.environ["BENCH_PLAIN_PROFILE"]))
    uvicorn.Server(config).run()


def _profile_on_signals(path: Path) -> None:
    """Signal handlers run in the main thread, which is uvicorn's event loop: cProfile then sees the request path
    (HTTP, FastAPI, the store's client, JSON), not the worker threads that score."""
    profiler = cProfile.Profile()

    def stop(*_) -> None:
        profiler.disable()
        profiler.dump_stats(f"{path}.partial")
        os.replace(f"{path}.partial", path)

    signal.signal(signal.SIGUSR1, lambda *_: profiler.enable())
    signal.signal(signal.SIGUSR2, stop)


if __name__ == "__main__":
    _serve()
