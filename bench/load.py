"""The load generator: N concurrent HTTP clients on loopback, each request's latency, percentiles.

One point = one concurrency on one workload, bounded by a request count and a time limit (whichever comes first).
Clients spread over several API keys (accounts), as real traffic does: an account may have at most its plan's
`max_in_flight` (32) requests being scored at once, and the benchmark measures throughput, not that guard.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

REQUEST_TIMEOUT_S = 120
ONE_CONNECTION = httpx.Limits(max_connections=1, max_keepalive_connections=1)
TRANSPORT_ERROR = 0  # the "status" of a request that got no HTTP answer (connection reset, timeout)


@dataclass(frozen=True)
class Workload:
    """Requests of one kind, sent in turn: a path, a key's profile, and the request bodies."""

    name: str
    path: str
    profile: str
    bodies: list[dict]


@dataclass(frozen=True)
class Point:
    """What one concurrency level gave: completed requests per second and latency percentiles (seconds)."""

    concurrency: int
    requests: int
    errors: int
    seconds: float
    p50_s: float
    p95_s: float
    p99_s: float
    statuses: tuple[int, ...] = ()  # the distinct non-2xx statuses seen, if any
    warmed: int = 0  # the clients' connection warm-ups answered 2xx (unmeasured, but served: bench/cascade.py counts)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def percentile(values: list[float], percent: float) -> float:
    """Nearest-rank percentile (the smallest value with at least `percent`% of the values at or below it)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(concurrency: int, latencies: list[float], errors: int, seconds: float, statuses=(),
              warmed: int = 0) -> Point:
    return Point(
        concurrency, len(latencies), errors, seconds,
        percentile(latencies, 50), percentile(latencies, 95), percentile(latencies, 99), tuple(sorted(set(statuses))),
        warmed,
    )


def point_budget(concurrency: int, min_requests: int) -> int:
    """Requests in one point: enough for a p99 at low concurrency, a few rounds of every client at high."""
    return max(min_requests, 4 * concurrency)


def run_point(
    base_url: str, keys: list[dict[str, str]], workload: Workload, concurrency: int, max_requests: int, max_s: float,
    on_start: Callable[[], None] | None = None,
) -> Point:
    """`concurrency` clients (keep-alive), each one request warming its connection, then measured requests until
    `max_requests` have been sent or `max_s` has passed. Failed requests (non-2xx) are counted, not timed.
    `on_start` is called once every connection is warm, just before the measured requests (bench.cpu reads CPU
    times there)."""
    return asyncio.run(_run_point(base_url, keys, workload, concurrency, max_requests, max_s, on_start))


async def _run_point(base_url, keys, workload, concurrency, max_requests, max_s, on_start=None) -> Point:
    numbers = itertools.count()
    latencies: list[float] = []
    failures: list[int] = []
    warm_answers: list[int] = []
    bodies = workload.bodies

    async def client(index: int, warmed: asyncio.Queue, started: asyncio.Event, deadline: list[float]) -> None:
        # One connection per client, each in its own pool: a pool shared by 64 connections costs the load
        # generator about five times more CPU per request than at 16 (measured), and on two cores that CPU is
        # taken from the service being measured.
        headers = keys[index % len(keys)]
        async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_S, limits=ONE_CONNECTION) as http:
            try:  # connection warm-up
                warm_answers.append((await http.post(workload.path, headers=headers,
                                                     **bodies[index % len(bodies)])).status_code)
            except httpx.HTTPError:
                pass  # the measured requests will tell
            finally:
                warmed.put_nowait(index)
            await started.wait()
            while (number := next(numbers)) < max_requests and time.perf_counter() < deadline[0]:
                start = time.perf_counter()
                try:
                    response = await http.post(workload.path, headers=headers, **bodies[number % len(bodies)])
                except httpx.HTTPError:  # connection reset or timed out: a failure, not the end of the benchmark
                    failures.append(TRANSPORT_ERROR)
                    continue
                if response.status_code < 300:
                    latencies.append(time.perf_counter() - start)
                else:
                    failures.append(response.status_code)
                    # As a well-behaved client does (the OpenAI SDK, for one): a refusal's Retry-After is honoured,
                    # so a refused client does not spin the cores it shares with the service.
                    await asyncio.sleep(min(retry_after_s(response), max(0.0, deadline[0] - time.perf_counter())))

    warmed, started, deadline = asyncio.Queue(), asyncio.Event(), [math.inf]
    tasks = [asyncio.create_task(client(i, warmed, started, deadline)) for i in range(concurrency)]
    for _ in range(concurrency):
        await warmed.get()
    if on_start is not None:
        on_start()
    start = time.perf_counter()
    deadline[0] = start + max_s
    started.set()
    await asyncio.gather(*tasks)
    seconds = time.perf_counter() - start
    return summarize(concurrency, latencies, len(failures), seconds, failures,
                     sum(1 for status in warm_answers if status < 300))


def retry_after_s(response: httpx.Response) -> float:
    """A 429's or 503's Retry-After in seconds (whole seconds only, as the service sends); 0 otherwise."""
    value = response.headers.get("retry-after", "")
    return float(value) if response.status_code in (429, 503) and value.isdigit() else 0.0


def status_of(base_url: str, headers: dict[str, str], workload: Workload) -> int:
    """The status of one request of `workload` (to find out whether an endpoint accepts it)."""
    body = workload.bodies[0]
    return httpx.post(base_url + workload.path, headers=headers, timeout=REQUEST_TIMEOUT_S, **body).status_code
