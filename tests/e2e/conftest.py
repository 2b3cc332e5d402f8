"""One real Ray Serve instance for the session: serve_config.yaml, real models, real Redis.

Deployed the way `make serve` deploys it (deployments.deploy), on a free loopback port,
with an embedded redis-server of its own. Stopped with serve.shutdown() and
ray.shutdown() at the end; never `ray stop`, which would hit other Ray work here.
"""

from __future__ import annotations

import os
import socket
import time

import httpx
import pytest
from support.tiny_models import tiny_bert

from serve_app.embedded_redis import EmbeddedRedis
from serve_app.settings import PROJECT_ROOT

ADMIN_TOKEN = "e2e-admin-token"
SWAP_VERSION = "tiny-bert-e2e-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]




@pytest.fixture(scope="session")
def serve_graph(tmp_path_factory):
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import serve

    from deployments.deploy import deploy, read_serve_config, wait_until_running

    workdir = tmp_path_factory.mktemp("e2e")
    redis_server = EmbeddedRedis(workdir / "redis")
    redis_url = redis_server.start()
    port = free_port()
    config = read_serve_config(
        PROJECT_ROOT / "serve_config.yaml",
        host="127.0.0.1",
        port=port,
        redis_url=redis_url,
        env_vars={"MODERATION_ADMIN_TOKEN": ADMIN_TOKEN},
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        deploy(config)
        wait_until_running(timeout_s=600)
        base_url = f"http://127.0.0.1:{port}"
        _wait_for_health(base_url)
        yield {"base_url": base_url, "config": config, "redis_url": redis_url, "workdir": workdir}
    finally:
        serve.shutdown()
        ray.shutdown()
        redis_server.stop()


def _wait_for_health(base_url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError("the graph never became healthy")


@pytest.fixture(scope="session")
def client(serve_graph):
    with httpx.Client(base_url=serve_graph["base_url"], timeout=60) as http:
        yield http


@pytest.fixture(scope="session")
def swap_entry(serve_graph) -> dict:
    """A tiny local Hugging Face text model as an inline registry entry: the swap target."""
    return {
        "version": SWAP_VERSION,
        "loader": "transformers_text",
        "weights": str(tiny_bert(serve_graph["workdir"] / "tiny-bert")),
        "options": {"labels": {"toxic": ["toxic"]}},
    }


@pytest.fixture(scope="session")
def admin() -> dict:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="session")
def new_key(client, admin):
    def make(profile: str = "default", plan: str = "default", account: str = "e2e") -> dict:
        body = {"account": account, "profile": profile, "plan": plan}
        response = client.post("/admin/v1/keys", json=body, headers=admin)
        assert response.status_code == 201, response.text
        return {"Authorization": f"Bearer {response.json()['key']}"}

    return make
