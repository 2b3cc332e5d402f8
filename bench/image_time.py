"""Where one image's time and CPU go: the nsfw image workload's CPU per request by process (bench/cpu.py's table),
and its wall time in the graph at one client by stage, read from what the service records itself
(deployments/metrics.py): the ingress's call to ImageModel, the upload's decoding and preparation in the replica, and
the model's batches, between two scrapes of Ray's metrics endpoint around that client count's reading.

Those are Prometheus histograms with buckets of 1, 2, 3, 5, 7.5, 10, 15, 20, 30... ms, and Ray exports a histogram's
`_sum` from bucket midpoints: what can be read of a stage is how many were observed and the bucket that holds their
median. The page shows that bucket, not a figure made up from it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from bench import service
from bench.cpu import CpuReading, before_note, cpu_table, shared_note

CALL_METRIC = "ray_moderation_model_call_latency_ms"
BATCH_METRIC = "ray_moderation_model_batch_latency_ms"
PREPARE_METRIC = "ray_moderation_image_prepare_latency_ms"
IMAGE = "image"  # the ingress's call's `target` and the batch's `model` (deployments/handles.py, image_model.py)
# Ray's processes push their metrics to the endpoint every 10 s by default (RAY_metrics_report_interval_ms).
PUSH_WAIT_S = 15.0


@dataclass(frozen=True)
class Stage:
    """One histogram's observations between two scrapes: how many, and the (low, high] ms bucket of their median."""

    count: int
    median_ms: tuple[float, float] | None


@dataclass(frozen=True)
class Stages:
    """One image's wall time by stage in the graph, over one fixed run at `clients` clients."""

    clients: int
    requests: int
    client_p50_s: float | None
    call: Stage  # ingress -> ImageModel.score_upload and back, as the ingress sees it
    batch: Stage  # one batch through the model, in the ImageModel replica
    mean_batch: float | None
    prepare: Stage | None = None  # decoding and the models' preprocessing, before the batch (a run before it: None)


def median_bucket(cumulative: dict[float, float]) -> tuple[float, float] | None:
    """The (low, high] bounds of the bucket that holds the median (nearest rank) of a histogram's cumulative counts
    by upper bound; None when it has no observations."""
    total = cumulative.get(math.inf, 0.0)
    low = 0.0
    for bound in sorted(cumulative):
        if total > 0 and cumulative[bound] >= math.ceil(total / 2):
            return low, bound
        low = bound
    return None


def stage_between(before: str, after: str, metric: str, label: str, where: dict[str, str] | None = None) -> Stage:
    cumulative = service.histogram_between(before, after, metric, label, where).get(IMAGE, {})
    return Stage(round(cumulative.get(math.inf, 0.0)), median_bucket(cumulative))


def read(before: str, after: str, reading: CpuReading) -> Stages:
    sizes = service.batch_sizes(before, after).get(IMAGE)
    return Stages(reading.clients, reading.requests, reading.p50_s,
                  stage_between(before, after, CALL_METRIC, "target", {"outcome": "ok"}),
                  stage_between(before, after, BATCH_METRIC, "model"), sizes[0] if sizes else None,
                  stage_between(before, after, PREPARE_METRIC, "model"))


def scrape_when_pushed(url: str, before: str, calls: int, max_s: float = PUSH_WAIT_S, poll_s: float = 1.0) -> str:
    """Ray's metrics endpoint once it shows, since `before`, `calls` answered calls to ImageModel and as many images
    batched (each from its own replica's push), or as it is after `max_s`."""
    deadline = time.monotonic() + max_s
    while True:
        after = service.scrape(url)
        mean, _, batches = service.batch_sizes(before, after).get(IMAGE, (0.0, 0.0, 0))
        counted = stage_between(before, after, CALL_METRIC, "target", {"outcome": "ok"}).count
        if (counted >= calls and mean * batches >= calls) or time.monotonic() >= deadline:
            return after
        time.sleep(poll_s)


def _bucket(stage: Stage) -> str:
    if stage.median_ms is None:
        return "none observed"
    low, high = stage.median_ms
    return f"under {high:g} ms" if low == 0 else f"over {low:g} ms" if high == math.inf else f"{low:g}-{high:g} ms"


def stage_table(stages: Stages, decode_s: float) -> list[str]:
    p50 = f"{stages.client_p50_s * 1000:.1f} ms" if stages.client_p50_s is not None else ""
    mean = f"{stages.mean_batch:.2f}" if stages.mean_batch is not None else "unknown"
    return [
        "| stage of one image | median | observed | read from |",
        "|---|---|---|---|",
        "| the request as the client sees it (HAProxy, the ingress's HTTP and store work, the call below, the "
        f"decision, the response) | {p50} | {stages.requests} requests | the load generator |",
        "| the ingress's call to ImageModel.score_upload (Ray hop, decoding and preparing, then the batch with the PDQ "
        f"hash beside it, hop back) | {_bucket(stages.call)} | {stages.call.count} calls | `{CALL_METRIC}` (target "
        "image, outcome ok) |",
        *([f"| decoding the upload and making each model's input, in a decode worker of the replica (its wait for a "
           f"worker included) | {_bucket(stages.prepare)} | {stages.prepare.count} uploads | `{PREPARE_METRIC}` |"]
          if getattr(stages, "prepare", None) is not None else []),
        f"| one batch through the model, scoring only ({mean} images a batch on average) | {_bucket(stages.batch)} | "
        f"{stages.batch.count} batches | `{BATCH_METRIC}` (model image) |",
        f"| decoding one bench photo, measured apart before the services start | {decode_s * 1000:.1f} ms | | "
        "`bench/limit.py` decode_seconds |",
    ]


def section(readings: dict[str, dict[int, CpuReading]], stages: Stages | None, decode_s: float, cores: int,
            before: str | None = None) -> list[str]:
    """The images' `## CPU per request` section of docs/benchmarks.md, with the stages table when there is one."""
    if not readings:
        return []
    lines = [
        "## CPU per request, by process (image, nsfw only)",
        "",
        "The same fixed runs as for the short text above (bench/cpu.py: at each client count the graph, then the "
        "plain app, each process's CPU read around the run and divided by the requests answered), on the nsfw image "
        "workload: the 8 bench photos as JPEG, one per request, profile \"default\". In the graph the ingress "
        "forwards an upload's bytes and the ImageModel replica decodes, hashes (PDQ) and scores it; in the plain "
        "app all of it is the one process." + shared_note(readings, cores) + before_note(readings, before),
        "",
        *cpu_table(readings),
        "",
    ]
    if stages is not None:
        lines += [
            f"### An image's wall time by stage (graph, {stages.clients} client{'s' if stages.clients > 1 else ''})",
            "",
            f"Over the graph's {stages.clients}-client run of the table above. The middle rows are the service's "
            "own histograms (deployments/metrics.py) between two scrapes of Ray's metrics endpoint around that run: "
            "their buckets are 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 40, 50, 75, 100... ms and Ray exports a histogram's "
            "sum from bucket midpoints, so a stage's median is shown as the bucket that holds it. The request holds "
            "the call; the call holds the upload's decoding and preparation, then its batch (with the PDQ hash in "
            "another thread beside it) and the hop back.",
            "",
            *stage_table(stages, decode_s),
            "",
        ]
    return lines
