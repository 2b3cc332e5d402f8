"""The whole graph (runtime.local_graph: serve_config.yaml, its own redis-server, a free loopback port),
driven over HTTP, and the memory of the processes it runs in."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass

import httpx

from bench.memory import ProcessMemory, memory_of_descendants

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
PLAN = "bench"
# High enough that 429 (rate) and 402 (quota) never interfere.
PLAN_LIMITS = {"scope": "both", "monthly_quota": 1_000_000_000, "rate_per_second": 1_000_000, "burst": 1_000_000}
DEPLOYMENTS = ("ModerationIngress", "ImageModel", "TextModel", "Policy")
RAY_CPUS = 2
REQUEST_TIMEOUT_S = 120


@dataclass(frozen=True)
class Workload:
    """Requests of one kind, sent in turn: a path, a key's profile, and the request bodies."""

    name: str
    path: str
    profile: str
    bodies: list[dict]


def image_workload(name: str, profile: str, jpegs: list[bytes]) -> Workload:
    return Workload(name, "/v1/moderate", profile, [{"files": {"image": ("photo.jpg", j, "image/jpeg")}} for j in jpegs])


def text_workload(name: str, texts: list[str]) -> Workload:
    return Workload(name, "/v1/moderate-text", "default", [{"json": {"text": t}} for t in texts])


def bench_keys(admin_url: str, profiles: set[str]) -> dict[str, dict[str, str]]:
    """Authorization headers by profile, for keys on the unlimited bench plan (through the admin listener)."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=admin_url, headers=admin, timeout=REQUEST_TIMEOUT_S) as client:
        _check(client.put(f"/admin/v1/plans/{PLAN}", json=PLAN_LIMITS))
        headers = {}
        for profile in sorted(profiles):
            response = _check(client.post("/admin/v1/keys", json={"account": "bench", "profile": profile, "plan": PLAN}))
            headers[profile] = {"Authorization": f"Bearer {response.json()['key']}"}
    return headers


def sequential_seconds(base_url: str, headers: dict[str, str], workload: Workload, count: int) -> list[float]:
    """Wall seconds of `count` requests sent one after another by one client."""
    seconds = []
    with httpx.Client(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
        for body in itertools.islice(itertools.cycle(workload.bodies), count):
            start = time.perf_counter()
            _check(client.post(workload.path, **body))
            seconds.append(time.perf_counter() - start)
    return seconds


def requests_per_s(base_url: str, headers: dict[str, str], workload: Workload, clients: int, total: int) -> float:
    """Completed requests per second when `clients` concurrent clients send `total` requests in all."""
    return asyncio.run(_requests_per_s(base_url, headers, workload, clients, total))


async def _requests_per_s(base_url: str, headers: dict, workload: Workload, clients: int, total: int) -> float:
    numbers = itertools.count()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=REQUEST_TIMEOUT_S, limits=limits) as http:

        async def client() -> None:
            while (number := next(numbers)) < total:
                _check(await http.post(workload.path, **workload.bodies[number % len(workload.bodies)]))

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return total / (time.perf_counter() - start)


def replica_states() -> dict[str, dict[str, int]]:
    """deployment -> replica state (RUNNING, STARTING...) -> count, as Serve reports them now."""
    from ray import serve

    from runtime.deploy import APP_NAME

    deployments = serve.status().applications[APP_NAME].deployments
    return {name: {state: n for state, n in deployments[name].replica_states.items() if n} for name in DEPLOYMENTS}


def graph_memory() -> dict[str, list[ProcessMemory]]:
    """The processes this run started (Ray, its workers, the store's valkey-server), grouped by what they are."""
    groups: dict[str, list[ProcessMemory]] = {}
    for process in memory_of_descendants():
        groups.setdefault(_group_of(process.title), []).append(process)
    return groups


def _group_of(title: str) -> str:
    for name in DEPLOYMENTS:
        if f"ServeReplica:moderation:{name}" in title:
            return name
    if "ServeController" in title:
        return "Serve controller"
    if "ProxyActor" in title:
        return "Serve proxy"
    if "valkey-server" in title or "redis-server" in title:
        return "Redis"
    return "Ray core"


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}")
    return response
