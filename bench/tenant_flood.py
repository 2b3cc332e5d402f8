"""One tenant floods what the store keeps while another tenant is served (SECURITY.md, "One tenant cannot fill the
store").

For `seconds` (60 by default) the flooding tenant's clients loop as fast as its key allows over everything a tenant
can make the service keep: widget tokens of a day (the longest), Perspective score suggestions (feedback), reports
of fresh references, and texts its profile sends to review. Meanwhile the other tenant's clients send short texts,
one after another. What comes back: the other tenant's latencies and statuses, the flooder's statuses, the store's
used memory against its `maxmemory` (sampled every half second), and every 503 either tenant saw without
Retry-After (there must be none: a 503 tells a client to retry).

Bounded on purpose: a fixed time, loopback only. The load runs in this process (asyncio), apart from the graph's.

    python -m bench.tenant_flood [--seconds 60]   # on a graph of its own, as `make serve` runs it
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from bench.load import percentile

FLOOD_S = 60.0
FLOOD_CLIENTS = 16
OTHER_CLIENTS = 4
# The other tenant keeps within its plan (the default: 20 a second): 4 clients at most 4 texts a second each, so
# that what it meets is the flood's doing, not its own rate limit.
OTHER_INTERVAL_S = 0.25
# The flooder's plan: far more generous than the default (20 a second), so that what bounds its flood is the
# service's per-tenant bounds, not its rate.
FLOOD_PLAN = {"scope": "both", "monthly_quota": 100_000_000, "rate_per_second": 500, "burst": 500}
# Every text decided `review`: each one the flooder sends asks for a review item.
REVIEW_ALL = {
    "mode": "review", "report_threshold": 1,
    "categories": {"nsfw": {"review": 0.0, "block": 1.0}, "toxic": {"review": 0.0, "block": 1.0}},
}  # fmt: skip
ORIGIN = "https://flood.example"
OTHER_TEXTS = ["Thanks for the quick delivery!", "I disagree with the last point, but the data is interesting.",
               "Does anyone know when the library opens on Sundays?", "Great photo, where was it taken?"]
# The other tenant's p99 while the flood runs: one tenant's flood must not cost another more than this
# (SECURITY.md, "One tenant cannot fill the store").
P99_BOUND_S = 1.0
MEMORY_BOUND = 0.8  # the store's peak used memory, as a share of maxmemory


@dataclass
class FloodResult:
    seconds: float
    other_latencies_s: list[float] = field(default_factory=list)
    other_statuses: Counter = field(default_factory=Counter)
    flood_statuses: Counter = field(default_factory=Counter)  # "action status" -> count
    unretryable_503s: int = 0  # 503 answers without Retry-After, either tenant
    memory_start_bytes: int = 0
    memory_peak_bytes: int = 0
    maxmemory_bytes: int = 0

    @property
    def other_p50_s(self) -> float:
        return percentile(self.other_latencies_s, 50)

    @property
    def other_p99_s(self) -> float:
        return percentile(self.other_latencies_s, 99)

    @property
    def peak_memory_share(self) -> float:
        return self.memory_peak_bytes / self.maxmemory_bytes if self.maxmemory_bytes else float("nan")

    def lines(self) -> list[str]:
        """The benchmarks page's section: what was sent, what each tenant met, and the targets."""
        flood = ", ".join(f"{what}: {n}" for what, n in sorted(self.flood_statuses.items()))
        other = ", ".join(f"{status}: {n}" for status, n in sorted(self.other_statuses.items()))
        p99_met = self.other_p99_s < P99_BOUND_S
        memory_met = self.peak_memory_share < MEMORY_BOUND
        return [
            f"For {self.seconds:.0f} s, {FLOOD_CLIENTS} clients of one tenant (a plan of "
            f"{FLOOD_PLAN['rate_per_second']} requests a second) minted day-long widget tokens, sent score "
            "suggestions and reports of fresh references, and sent texts its profile queues for review, while "
            f"{OTHER_CLIENTS} clients of another tenant sent short texts, each at most one every "
            f"{OTHER_INTERVAL_S * 1000:.0f} ms, within its plan's rate (`bench/tenant_flood.py`).",
            "",
            f"- Flooding tenant, by action and status: {flood}.",
            f"- Other tenant: {len(self.other_latencies_s)} texts ({other}); p50 {self.other_p50_s * 1000:.0f} ms, "
            f"p99 {self.other_p99_s * 1000:.0f} ms: {'met' if p99_met else 'missed'} (p99 under "
            f"{P99_BOUND_S * 1000:.0f} ms).",
            f"- Store: {self.memory_start_bytes / 2**20:.1f} MiB used before, {self.memory_peak_bytes / 2**20:.1f} MiB "
            f"at the peak, of {self.maxmemory_bytes / 2**20:.0f} MiB `maxmemory` ({self.peak_memory_share:.1%}): "
            f"{'met' if memory_met else 'missed'} (under {MEMORY_BOUND:.0%}).",
            f"- 503 answers without Retry-After: {self.unretryable_503s} (there must be none).",
        ]


def setup_tenants(admin_url: str, admin_token: str) -> tuple[dict[str, str], dict[str, str]]:
    """Authorization headers of the flooding tenant (its own plan and review-all profile, the widget on) and of the
    other tenant (the default plan and profile), through the admin API."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    with httpx.Client(base_url=admin_url, headers=admin, timeout=60) as client:
        _ok(client.put("/admin/v1/plans/flood", json=FLOOD_PLAN))
        _ok(client.put("/admin/v1/profiles/flood-review-all", json=REVIEW_ALL))
        flooder = _ok(client.post("/admin/v1/keys", json={"account": "flooder", "profile": "flood-review-all",
                                                          "plan": "flood"})).json()  # fmt: skip
        _ok(client.put(f"/admin/v1/keys/{flooder['id']}/widget", json={"origins": [ORIGIN]}))
        other = _ok(client.post("/admin/v1/keys", json={"account": "flood-other", "profile": "default",
                                                        "plan": "default"})).json()  # fmt: skip
    return {"Authorization": f"Bearer {flooder['key']}"}, {"Authorization": f"Bearer {other['key']}"}


def measure(base_url: str, admin_url: str, admin_token: str, store_owner_url: str, maxmemory_bytes: int,
            seconds: float = FLOOD_S) -> FloodResult:  # fmt: skip
    flooder, other = setup_tenants(admin_url, admin_token)
    return asyncio.run(_run(base_url, flooder, other, store_owner_url, maxmemory_bytes, seconds))


async def _run(base_url: str, flooder: dict, other: dict, store_owner_url: str, maxmemory_bytes: int,
               seconds: float) -> FloodResult:  # fmt: skip
    result = FloodResult(seconds=seconds, maxmemory_bytes=maxmemory_bytes)
    store = redis.Redis.from_url(store_owner_url)  # INFO is the owner's: the service's user may not run it
    result.memory_start_bytes = result.memory_peak_bytes = _used_memory(store)
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=FLOOD_CLIENTS + OTHER_CLIENTS)
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits) as client:
        await asyncio.gather(
            *(_flood(client, flooder, deadline, result, index) for index in range(FLOOD_CLIENTS)),
            *(_other(client, other, deadline, result) for _ in range(OTHER_CLIENTS)),
            _watch_memory(store, deadline, result),
        )
    store.close()
    return result


def _flood_requests(index: int):
    """The flooder's requests in turn, each one that asks the store to keep something new."""
    for n in itertools.count():
        fresh = f"{index}-{n}-{secrets.token_hex(4)}"
        yield "token", "/v1/widget/tokens", {"json": {"minutes": 1440, "uses": 1000}}
        yield "suggest", "/v1alpha1/comments:suggestscore", {"json": {
            "comment": {"text": f"suggested {fresh}"}, "clientToken": fresh,
            "attributeScores": {"TOXICITY": {"summaryScore": {"value": 0.9}}}}}
        yield "report", "/v1/report", {"data": {"reference": f"post-{fresh}"}}
        yield "review", "/v1/moderate-text", {"json": {"text": f"please review comment {fresh}"}}


async def _flood(client: httpx.AsyncClient, headers: dict, deadline: float, result: FloodResult, index: int):
    for action, path, body in _flood_requests(index):
        if time.monotonic() >= deadline:
            return
        try:
            response = await client.post(path, headers=headers, **body)
        except httpx.HTTPError:
            result.flood_statuses[f"{action} no answer"] += 1
            continue
        result.flood_statuses[f"{action} {response.status_code}"] += 1
        _note_503(response, result)
        if response.status_code in (429, 503):
            # What a well-behaved client does is wait; a flooder does not, but a short pause keeps this process's
            # own CPU (the load generator) from being what is measured.
            await asyncio.sleep(0.005)


async def _other(client: httpx.AsyncClient, headers: dict, deadline: float, result: FloodResult):
    for text in itertools.cycle(OTHER_TEXTS):
        if time.monotonic() >= deadline:
            return
        started = time.monotonic()
        try:
            response = await client.post("/v1/moderate-text", headers=headers, json={"text": text})
            status = response.status_code
            _note_503(response, result)
        except httpx.HTTPError:
            status = 0
        elapsed = time.monotonic() - started
        result.other_latencies_s.append(elapsed)
        result.other_statuses[status] += 1
        await asyncio.sleep(max(0.0, OTHER_INTERVAL_S - elapsed))


async def _watch_memory(store: redis.Redis, deadline: float, result: FloodResult):
    while time.monotonic() < deadline:
        used = await asyncio.to_thread(_used_memory, store)
        result.memory_peak_bytes = max(result.memory_peak_bytes, used)
        await asyncio.sleep(0.5)


def _used_memory(store: redis.Redis) -> int:
    return int(store.info("memory")["used_memory"])


def _note_503(response: httpx.Response, result: FloodResult) -> None:
    if response.status_code == 503 and "retry-after" not in response.headers:
        result.unretryable_503s += 1


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.request.url.path}: {response.status_code} "
                           f"{response.text}")  # fmt: skip
    return response


def main(argv: list[str] | None = None) -> None:
    from runtime.local_graph import local_graph

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=FLOOD_S)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    admin_token = secrets.token_urlsafe(32)
    os.environ.setdefault("RAY_ADDRESS", "local")  # a Ray instance of its own (bench/run.py says why)
    with tempfile.TemporaryDirectory(prefix="tenant-flood-") as workdir:
        with local_graph(Path(workdir), admin_token=admin_token) as graph:
            maxmemory = graph.store.maxmemory_mb * 2**20
            result = measure(graph.base_url, graph.admin_url, admin_token, graph.store.admin_url, maxmemory,
                             args.seconds)
    print("\n".join(result.lines()))
    if args.json:
        args.json.write_text(json.dumps({"other_p50_s": result.other_p50_s, "other_p99_s": result.other_p99_s,
                                         "peak_memory_share": result.peak_memory_share,
                                         "flood_statuses": dict(result.flood_statuses),
                                         "other_statuses": dict(result.other_statuses),
                                         "unretryable_503s": result.unretryable_503s}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
