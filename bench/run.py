"""`make bench`: the raw models, the whole graph over HTTP, the raw models again, then one table (stdout and
docs/benchmarks.md).

Bounded on purpose (a few minutes on two shared cores): counts are below. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from bench import raw, report, service
from bench.inputs import JPEG_QUALITY, PHOTOS, TEXTS, long_text, photo_jpegs
from runtime.deploy import served_model_versions
from runtime.local_graph import local_graph
from runtime.settings import PROJECT_ROOT

RAW_ROUNDS = 5  # batch 1: every input 5 times; batch 8: 5 calls of eight
LONG_TEXT_ROUNDS = 5  # the 20,000-character text takes seconds on one thread
SEQUENTIAL_REQUESTS = 40
LONG_TEXT_REQUESTS = 5
WARMUP_REQUESTS = 16
THROUGHPUT_REQUESTS = 200
THROUGHPUT_CLIENTS = (8, 16)

LABELS = {
    "image_default": 'image, nsfw only (profile "default")',
    "image_strict": 'image, nsfw + weapon + violence (profile "strict")',
    "text": f"text ({len(TEXTS)} texts of {min(map(len, TEXTS))}-{max(map(len, TEXTS))} chars)",
    "long_text": f"text of {len(long_text()):,} chars",
}
THROUGHPUT_WORKLOADS = ("image_default", "image_strict", "text")


def serve_config() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())


def apply_replica_environment(config: dict) -> None:
    """The replicas' environment (one BLAS/OpenMP thread...) for the raw side too.

    Must run before numpy or torch is imported: their thread pools read it once. Without it the raw text model
    runs several times slower on these two busy cores than the replica does.
    """
    for app in config["applications"]:
        os.environ.update(app.get("runtime_env", {}).get("env_vars", {}))


def measure_raw_memory(results: report.Results, versions: dict[str, str]) -> None:
    for group in raw.MEMORY_GROUPS:
        results.raw_memory[group] = raw.memory_growth_mib(group, versions)


def raw_timings(models: raw.RawModels, photos: list) -> dict[str, raw.ItemTiming]:
    timings = {
        name: raw.time_items(lambda b, c=categories: models.score_images(b, c), photos, RAW_ROUNDS)
        for name, categories in (("image_default", raw.NSFW_ONLY), ("image_strict", raw.ALL_CATEGORIES))
    }
    timings["text"] = raw.time_items(models.score_texts, list(TEXTS), RAW_ROUNDS)
    timings["long_text"] = raw.time_one(models.score_texts, long_text(), LONG_TEXT_ROUNDS)
    timings["decode"] = raw.ItemTiming(raw.decode_seconds(RAW_ROUNDS))
    return timings


def measure_service(results: report.Results) -> None:
    jpegs = photo_jpegs()
    workloads = {
        "image_default": service.image_workload("image_default", "default", jpegs),
        "image_strict": service.image_workload("image_strict", "strict", jpegs),
        "text": service.text_workload("text", list(TEXTS)),
        "long_text": service.text_workload("long_text", [long_text()]),
    }
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as workdir,
        local_graph(Path(workdir), admin_token=service.ADMIN_TOKEN, num_cpus=service.RAY_CPUS) as graph,
    ):
        base_url = graph.base_url
        keys = service.bench_keys(graph.admin_url, {w.profile for w in workloads.values()})
        for name in THROUGHPUT_WORKLOADS:
            service.requests_per_s(base_url, keys[workloads[name].profile], workloads[name], 8, WARMUP_REQUESTS)
        for name, workload in workloads.items():
            count = LONG_TEXT_REQUESTS if name == "long_text" else SEQUENTIAL_REQUESTS
            results.sequential_s[name] = service.sequential_seconds(base_url, keys[workload.profile], workload, count)
        # Read before the throughput runs, which may make the autoscaler start a second replica.
        results.graph_memory = service.graph_memory()
        cpu_before, wall_before = time.process_time(), time.perf_counter()
        for name in THROUGHPUT_WORKLOADS:
            for clients in THROUGHPUT_CLIENTS:
                workload = workloads[name]
                results.throughput[(name, clients)] = service.requests_per_s(
                    base_url, keys[workload.profile], workload, clients, THROUGHPUT_REQUESTS
                )
                results.replicas_after[(name, clients)] = service.replica_states()
        load_cpu_s, load_wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
    results.notes.append(
        f"The load generator (this process, httpx) used {load_cpu_s:.0f} CPU-s in the {load_wall_s:.0f} s of "
        f"throughput runs, on the same {os.cpu_count()} cores as the graph."
    )


def settings(versions: dict[str, str]) -> list[str]:
    return [
        "Models: " + ", ".join(f"{task}={version}" for task, version in versions.items()) + " (serve_config.yaml)",
        "Raw: in this process, onnxruntime and torch on 1 thread, with the replicas' environment from "
        "serve_config.yaml (OMP/OPENBLAS/MKL_NUM_THREADS=1); images are "
        f"{len(PHOTOS)} scikit-image photos as JPEG (quality {JPEG_QUALITY}) decoded to frames beforehand with "
        f"decode_image; batch 1 = every input alone x{RAW_ROUNDS}, batch 8 = one call of all eight x{RAW_ROUNDS}, "
        f"medians; the long text alone x{LONG_TEXT_ROUNDS}; all timed before and after the service phase, the "
        "faster median used.",
        "Raw memory: RSS growth of a fresh interpreter loading the models and scoring the same inputs once "
        "(image: the 3 image models; text: the text model; all: all 4 in one process).",
        f"Service: serve_config.yaml as committed, ray.init(num_cpus={service.RAY_CPUS}), embedded redis-server, "
        f'plan "{service.PLAN}" without effective limits; {WARMUP_REQUESTS} warm-up requests per workload at 8 '
        f"clients; latency = {SEQUENTIAL_REQUESTS} sequential requests cycling through the same inputs "
        f"({LONG_TEXT_REQUESTS} for the long text); throughput = {THROUGHPUT_REQUESTS} requests per run with "
        f"{' and '.join(map(str, THROUGHPUT_CLIENTS))} concurrent clients (httpx.AsyncClient, keep-alive).",
        "Ratios: latency = service p50 / raw batch-1 per item; throughput = service requests/s / raw batch-8 "
        "items/s on one thread; memory = service RSS / raw RSS growth.",
        "Memory of the graph: every process this run started (Ray core, Serve controller and proxy, replicas, "
        "redis-server), read from /proc/PID/smaps_rollup after the warm-up and latency requests, before the "
        "throughput runs (which may start more replicas).",
    ]


def main() -> None:
    started, start = datetime.now().astimezone(), time.perf_counter()
    config = serve_config()
    apply_replica_environment(config)
    versions = served_model_versions(config)
    results = report.Results(labels=LABELS, settings=settings(versions))
    load_before = report.load_average()
    measure_raw_memory(results, versions)
    models, photos = raw.RawModels(versions), raw.decoded_photos()
    # Timed before and after the service phase: other work on these cores comes and goes, and the faster median
    # is the fairer figure for the raw model (it makes every service/raw ratio err against the service).
    before = raw_timings(models, photos)
    measure_service(results)
    after = raw_timings(models, photos)
    results.raw = {name: raw.faster(before[name], after[name]) for name in before}
    results.notes.insert(0, f"Load average (1/5/15 min) before: {load_before}; after: {report.load_average()}.")
    results.notes.insert(1, "Raw batch-1 medians before / after the service phase (the faster is used): " + "; ".join(
        f"{name} {before[name].batch1_s * 1000:.1f} / {after[name].batch1_s * 1000:.1f} ms" for name in before
    ) + ".")
    results.notes.extend(_replica_notes(results))
    duration_s = time.perf_counter() - start
    print(report.table(results))
    report.write_document(report.document(results, started, duration_s))
    print(f"\nwritten to {report.DOC_PATH} ({duration_s:.0f} s)")


def _replica_notes(results: report.Results) -> list[str]:
    one_each = {"RUNNING": 1}
    longest_s = max(THROUGHPUT_REQUESTS / rps for rps in results.throughput.values())
    if all(states == one_each for replicas in results.replicas_after.values() for states in replicas.values()):
        return [
            f"Every deployment stayed at 1 replica through the throughput runs (the longest took {longest_s:.0f} s; "
            "Serve's autoscaler waits upscale_delay_s, 30 s by default, before adding one)."
        ]
    return [
        f"Autoscaling: after {LABELS[name]} at {clients} clients, "
        + ", ".join(
            f"{deployment} " + " + ".join(f"{n} {state}" for state, n in states.items())
            for deployment, states in replicas.items() if states != one_each
        )
        + "."
        for (name, clients), replicas in results.replicas_after.items()
        if any(states != one_each for states in replicas.values())
    ]


if __name__ == "__main__":
    main()
