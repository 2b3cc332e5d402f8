"""One real Ray Serve instance for the session: serve_config.yaml, real models, real Redis.

Deployed the way `make serve` deploys it (runtime.deploy), on a free loopback port,
with an embedded redis-server of its own (runtime/local_graph.py); three settings differ, each for time, each
explained below: a small cap of pending review items, Ray's metrics reported every 2 s, and no ingress drain.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from support.tiny_models import tiny_bert

from runtime.local_graph import local_graph
from runtime.ray_cluster import DRAIN_PERIOD_VARIABLE

ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"
# An external store's URL as `make serve` would read it: Ray's processes must not inherit it (test_ray_locked.py).
CANARY_REDIS_URL = "redis://canary:canary-store-password-0123@127.0.0.1:9/0"
SWAP_VERSION = "tiny-bert-e2e-1"


def pytest_collection_modifyitems(config, items):
    """Every test in this folder runs the real graph: marked e2e whether or not its module says so, so that
    `make test-fast` (-m "not e2e") never starts Ray."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


E2E_PENDING_CAP = 300
# Ray's processes send their metrics to the node's agent every 10 s by default (RAY_metrics_report_interval_ms); every
# 2 s in the session's graph, so that the tests that read Serve's counters after some requests (test_metrics,
# test_attacks_store) wait 2 s for the next report, not 10 s. What is exported, and how, stays Ray's.
METRICS_REPORT_S = 2
# A stopping ingress replica keeps serving for DRAIN_S (5 s, runtime/ray_cluster.py) so that HAProxy stops routing to it
# first. In the session's graph only its stop at the end of the session waited on it (5 of its 9 s): no test stops an
# ingress replica gracefully (test_faults SIGKILLs it; a redeploy changes only the TextModel). test_runner checks the
# drain of `make serve` as shipped.
E2E_DRAIN_S = 0


@pytest.fixture(scope="session")
def serve_graph(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e")
    # As under `make serve`: the secrets are in the environment of the process that starts Ray (which must drop
    # them before Ray's processes inherit it: runtime/ray_cluster.py).
    os.environ["MODERATION_ADMIN_TOKEN"], os.environ["REDIS_URL"] = ADMIN_TOKEN, CANARY_REDIS_URL
    # A small cap of pending review items, so that the test that reaches it writes hundreds of items, not 10,000
    # (which grew the store's AOF past its rewrite size and slowed the tests after it).
    env_vars = {"MODERATION_REVIEW_PENDING_PER_ACCOUNT": str(E2E_PENDING_CAP)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_metrics_report_interval_ms", str(METRICS_REPORT_S * 1000))  # inherited by Ray's processes
        patch.setenv(DRAIN_PERIOD_VARIABLE, str(E2E_DRAIN_S))
        with local_graph(workdir, admin_token=ADMIN_TOKEN, env_vars=env_vars) as graph:
            yield {"base_url": graph.base_url, "admin_url": graph.admin_url, "config": graph.config,
                   "redis_url": graph.redis_url, "workdir": workdir, "store": graph.store,
                   "supervisor": graph.supervisor}


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
        # A new text model must score every text category the profiles enable (the default profile: toxic,
        # insult, identity_attack, threat), or those requests are refused with 503 rather than decided without it.
        "options": {"labels": {"toxic": ["toxic"], "insult": ["toxic"], "identity_attack": ["toxic"],
                               "threat": ["toxic"]}},
    }


@pytest.fixture(scope="session")
def admin_client(serve_graph, admin):
    with httpx.Client(base_url=serve_graph["admin_url"], headers=admin, timeout=60) as http:
        yield http


@pytest.fixture(scope="session")
def admin() -> dict:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="session")
def new_key(admin_client):
    def make(profile: str = "default", plan: str = "default", account: str = "e2e") -> dict:
        body = {"account": account, "profile": profile, "plan": plan}
        response = admin_client.post("/admin/v1/keys", json=body)
        assert response.status_code == 201, response.text
        return {"Authorization": f"Bearer {response.json()['key']}"}

    return make
