"""Graphs of their own for tests that need a different Ray cluster than the session graph (tests/e2e/conftest.py).

Each scenario runs in a child process (`python tests/e2e/scenarios.py NAME WORKDIR`), so that its Ray cluster
never meets the session graph's Ray in one process; it prints one JSON line, `RESULT {...}`, that the test reads.
The cluster is `ray.cluster_utils.Cluster` on loopback, with the token authentication of `make serve`
(runtime/ray_cluster.py), an embedded store, and a copy of serve_config.yaml changed by the scenario.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
APP = "moderation"


@dataclass
class Graph:
    base_url: str
    headers: list[dict[str, str]]  # one key per client, so that no client meets the rate limit
    head_node_id: str


def run_scenario(name: str, workdir: Path, timeout_s: float) -> dict:
    """Run scenario `name` in a child process; its RESULT line as a dict."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), name, str(workdir)],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"scenario {name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def deployment(config: dict, name: str) -> dict:
    (entry,) = [d for d in config["applications"][0]["deployments"] if d["name"] == name]
    return entry


@contextmanager
def graph(workdir: Path, nodes: list[dict], edit: Callable[[dict], None], clients: int = 1) -> Iterator[Graph]:
    """An embedded store, a Cluster of `nodes` (ray start arguments, head first) and the edited graph."""
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    from policy.types import Plan
    from runtime.deploy import deploy, read_serve_config, wait_until_running
    from runtime.embedded_store import EmbeddedStore
    from runtime.haproxy import remove_fallback_dir
    from runtime.local_graph import free_port, require_healthy
    from runtime.ray_cluster import DRAIN_PERIOD_VARIABLE, LOOPBACK, use_serve_ingress, use_token_auth

    store = EmbeddedStore(workdir / "redis")
    redis_url = store.start()
    cluster = None
    try:
        use_token_auth(workdir)  # the nodes' processes inherit it, as `make serve`'s do
        # No scenario stops an ingress replica before its end, where the drain (DRAIN_S, 5 s) was only waited out.
        os.environ[DRAIN_PERIOD_VARIABLE] = "0"
        # HAProxy as under `make serve`, on ports of its own: the session graph's (inherited) are taken.
        use_serve_ingress(haproxy=True, data_dir=workdir)
        loopback = {"node_ip_address": LOOPBACK}
        cluster = Cluster(initialize_head=True, head_node_args={**loopback, "include_dashboard": False, **nodes[0]})
        for node in nodes[1:]:
            cluster.add_node(**loopback, **node)
        ray.init(address=cluster.address, log_to_driver=False)
        port = free_port()
        config = read_serve_config(ROOT / "serve_config.yaml", host=LOOPBACK, port=port, redis_url=redis_url)
        config = copy.deepcopy(config)
        edit(config)
        deploy(config)
        wait_until_running(timeout_s=240)
        base_url = f"http://{LOOPBACK}:{port}"
        require_healthy(base_url)
        headers = asyncio.run(_keys(redis_url, clients, Plan))
        yield Graph(base_url=base_url, headers=headers, head_node_id=cluster.head_node.node_id)
    finally:
        if ray.is_initialized():
            serve.shutdown()
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        remove_fallback_dir(workdir)  # HAProxy's private dir, when the workdir was too deep for it
        store.stop()


async def _keys(redis_url: str, count: int, Plan) -> list[dict[str, str]]:
    from redis.asyncio import Redis

    from store.keys.config import ConfigStore

    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        config = ConfigStore(redis)
        await config.put_plan(Plan(name="load", scope="both", monthly_quota=10**7, rate_per_second=10_000, burst=10_000))
        keys = [await config.create_key(f"load-{i}", "default", "load") for i in range(count)]
        return [{"Authorization": f"Bearer {secret}"} for _, secret in keys]
    finally:
        await redis.aclose()


def replicas_by_node() -> dict[str, list[str]]:
    """Deployment name -> node ids of its live replicas (from the GCS actor table; no dashboard needed)."""
    import ray

    found: dict[str, list[str]] = {}
    for actor in ray._private.state.actors().values():
        name = actor.get("ActorClassName", "")
        if actor.get("State") == "ALIVE" and name.startswith(f"ServeReplica:{APP}:"):
            found.setdefault(name.rsplit(":", 1)[1], []).append(actor["Address"]["NodeID"])
    return found


def running_replicas(name: str) -> int:
    from ray import serve

    status = serve.status().applications[APP].deployments[name]
    return status.replica_states.get("RUNNING", 0)


# --- two nodes -------------------------------------------------------------------------------------------------

def two_nodes(workdir: Path) -> dict:
    """Head: proxy, ingress, policy. Second node (`model_node`): both model deployments. Requests go through both."""

    def edit(config: dict) -> None:
        for name in ("ModerationIngress", "Policy"):
            deployment(config, name)["ray_actor_options"]["resources"] = {"ingress_node": 0.01}
        for name in ("ImageModel", "TextModel"):
            entry = deployment(config, name)
            entry.pop("autoscaling_config", None)
            entry["num_replicas"] = 1
            entry["ray_actor_options"]["resources"] = {"model_node": 0.01}

    nodes = [
        {"num_cpus": 1, "resources": {"ingress_node": 1}},
        {"num_cpus": 1, "resources": {"model_node": 1}},
    ]
    started = time.monotonic()
    with graph(workdir, nodes, edit) as g:
        up_s = time.monotonic() - started
        import ray

        nodes_alive = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        statuses, decisions = [], []
        with httpx.Client(base_url=g.base_url, headers=g.headers[0], timeout=60) as http:
            for i in range(5):
                r = http.post("/v1/moderate-text", json={"text": f"have a nice day {i}"})
                statuses.append(r.status_code)
                decisions.append(r.json().get("decision"))
            with (ROOT / "docs" / "examples" / "coffee.jpg").open("rb") as image:
                r = http.post("/v1/moderate", files={"image": image})
            statuses.append(r.status_code)
            decisions.append(r.json().get("decision"))
        return {
            "up_s": round(up_s, 1),
            "head": g.head_node_id,
            "nodes": nodes_alive,
            "replicas": replicas_by_node(),
            "statuses": statuses,
            "decisions": decisions,
        }


# --- autoscaling -----------------------------------------------------------------------------------------------

LOAD_CLIENTS = 6
LONG_TEXT = ("The weather today is mild and the market opens at nine. " * 80)[:4000]


def autoscaling(workdir: Path) -> dict:
    """TextModel under a bounded load scales 1 -> 2 replicas, and back to 1 once the load stops."""

    def edit(config: dict) -> None:
        entry = deployment(config, "TextModel")
        entry["autoscaling_config"] = {
            "min_replicas": 1,
            "initial_replicas": 1,
            "max_replicas": 2,
            "target_ongoing_requests": 1,
            "upscale_delay_s": 1,
            "downscale_delay_s": 3,
            "metrics_interval_s": 0.5,
            "look_back_period_s": 2,
        }
        entry["ray_actor_options"]["num_cpus"] = 0.25  # room for the second replica beside the rest

    with graph(workdir, [{"num_cpus": 2}], edit, clients=LOAD_CLIENTS) as g:
        assert running_replicas("TextModel") == 1
        stop = threading.Event()
        answers: list[int] = []

        def client(headers: dict[str, str]) -> None:
            with httpx.Client(base_url=g.base_url, headers=headers, timeout=60) as http:
                while not stop.is_set():
                    answers.append(http.post("/v1/moderate-text", json={"text": LONG_TEXT}).status_code)

        threads = [threading.Thread(target=client, args=(h,), daemon=True) for h in g.headers]
        load_started = time.monotonic()
        for thread in threads:
            thread.start()
        scaled_up_s = _wait_for(lambda: running_replicas("TextModel") >= 2, timeout_s=60)
        peak = running_replicas("TextModel")
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        load_s = time.monotonic() - load_started
        load_stopped = time.monotonic()
        scaled_down_s = _wait_for(lambda: running_replicas("TextModel") == 1, timeout_s=60, since=load_stopped)
        return {
            "scaled_up_s": scaled_up_s,
            "scaled_down_s": scaled_down_s,
            "peak_replicas": peak,
            "load_s": round(load_s, 1),
            "requests": len(answers),
            "statuses": sorted(set(answers)),
        }


def _wait_for(condition: Callable[[], bool], timeout_s: float, since: float | None = None) -> float | None:
    """Seconds until `condition()` holds (from `since`, else now), or None after `timeout_s`."""
    started = since if since is not None else time.monotonic()
    while time.monotonic() - started < timeout_s:
        if condition():
            return round(time.monotonic() - started, 1)
        time.sleep(0.25)
    return None


SCENARIOS = {"two_nodes": two_nodes, "autoscaling": autoscaling}

if __name__ == "__main__":
    # Ray turns a loopback address given to ray.init() into the machine's address (which the loopback-bound
    # GCS does not answer) unless multi-node clusters count as unsupported here: then loopback stays loopback.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    name, workdir = sys.argv[1], Path(sys.argv[2])
    workdir.mkdir(parents=True, exist_ok=True)
    result = SCENARIOS[name](workdir)
    print("RESULT " + json.dumps(result), flush=True)
