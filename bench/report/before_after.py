"""The page's "Before and after" section, where a run has a baseline (`python -m bench.run --baseline PICKLE`): the
graph of the earlier run and of this one, workload by workload, each beside its own run's plain app."""

from __future__ import annotations

from bench.limit import Limit
from bench.load import Point
from bench.report.labels import LABELS
from bench.report.markdown import prose, table
from bench.report.ratios import HEADLINE_CLIENTS, point_at
from bench.report.results import Results


def section(results: Results) -> list[str]:
    """The graph of the baseline run and of this one, workload by workload, at 1 and 16 clients (and the best)."""
    before = results.baseline
    if before is None:
        return []
    graph, plain = results.columns["graph"], results.columns["plain"]
    rows = [("workload", "clients", "before: graph req/s (plain)", "now: graph req/s (plain)",
             "before: graph p50 ms (plain)", "now: graph p50 ms (plain)", "before / now: graph over raw limit")]
    for name, points in graph.points.items():
        old_points = before.points.get(name, [])
        for clients in (1, HEADLINE_CLIENTS, "best"):
            ours, theirs = _pick(points, clients), _pick(old_points, clients)
            ours_plain = point_at(plain.points.get(name, []), ours.concurrency) if ours else None
            theirs_plain = point_at(before.plain_points.get(name, []), theirs.concurrency) if theirs else None
            rows.append((
                LABELS[name], str(clients) if clients != "best" else f"best ({_c(theirs)} / {_c(ours)})",
                _beside(theirs, theirs_plain, "rps"), _beside(ours, ours_plain, "rps"),
                _beside(theirs, theirs_plain, "p50"), _beside(ours, ours_plain, "p50"),
                f"{_over_limit(theirs, before.limit.get(name))} / {_over_limit(ours, results.limit.get(name))}",
            ))
    return ["## Before and after", "", *prose("before_and_after", baseline=before.label), "", table(rows), ""]


def _pick(points: list[Point], clients: int | str) -> Point | None:
    if clients == "best":
        return max(points, key=lambda p: p.rps, default=None)
    return point_at(points, clients)


def _c(point: Point | None) -> str:
    return str(point.concurrency) if point else "-"


def _beside(point: Point | None, plain: Point | None, what: str) -> str:
    if point is None:
        return ""
    value = (lambda p: f"{p.rps:.1f}") if what == "rps" else (lambda p: f"{p.p50_s * 1000:.1f}")
    return value(point) + (f" ({value(plain)})" if plain else "")


def _over_limit(point: Point | None, limit: Limit | None) -> str:
    return f"{point.rps / limit.items_per_s:.2f}" if point and limit and limit.items_per_s else "-"
