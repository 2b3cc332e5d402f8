"""The page's "Levers" section: each lever measured this run on a graph of its own, kept or not by the figures (the
rule: KEEP_LEVER_GAIN and below), then the levers kept from earlier runs (prose/lever_notes.md)."""

from __future__ import annotations

from collections import Counter

from bench import cascade
from bench.report.labels import COLUMN_LABELS, LABELS
from bench.report.markdown import prose
from bench.report.ratios import HEADLINE_CLIENTS, p50_excess, point_at, throughput_ratio
from bench.report.results import Results

KEEP_LEVER_GAIN = 1.05  # a lever is kept when it gains at least 5% throughput at 16 clients on every workload


def section(results: Results) -> list[str]:
    return ["## Levers", "", *levers(results), *prose("lever_notes"), ""]


def levers(results: Results) -> list[str]:
    lines = []
    graph = results.columns["graph"]
    for lever in results.levers:
        if lever == cascade.LEVER and lever not in results.lever_failures:
            lines.append(f"- **{COLUMN_LABELS[lever]}**: not a lever to keep or drop but what the cascade is measured "
                         "against: see the Text cascade section.")
            continue
        if lever in results.lever_failures:
            lines.append(f"- **{COLUMN_LABELS[lever]}**: the graph did not come up or failed requests: "
                         f"`{results.lever_failures[lever]}`. Rejected.")
            continue
        column = results.columns[lever]
        parts, gains = [], []
        for name, points in column.points.items():
            base16, lever16 = point_at(graph.points[name], HEADLINE_CLIENTS), point_at(points, HEADLINE_CLIENTS)
            base_ratio, lever_ratio = throughput_ratio(results, name), throughput_ratio(results, name, lever)
            if base16 and lever16 and base_ratio and lever_ratio:
                gains.append(lever_ratio / base_ratio)
                parts.append(f"{LABELS[name]}: graph / plain at {HEADLINE_CLIENTS} clients {base_ratio:.2f} -> "
                             f"{lever_ratio:.2f} (x{lever_ratio / base_ratio:.2f}; {base16.rps:.1f} -> "
                             f"{lever16.rps:.1f} req/s)")
            base1, lever1 = p50_excess(results, name), p50_excess(results, name, lever)
            if base1 is not None and lever1 is not None:
                parts.append(f"p50 at 1 client above plain {base1 * 1000:+.1f} -> {lever1 * 1000:+.1f} ms")
        errors = sum(p.errors for points in column.points.values() for p in points)
        base_errors = sum(p.errors for name, points in graph.points.items() if name in column.points
                          for p in points if p.concurrency in results.plan.lever_concurrency)
        latency_gains = [p50_excess(results, n) - p50_excess(results, n, lever) for n in column.points
                         if p50_excess(results, n) is not None and p50_excess(results, n, lever) is not None]
        median_gain = sorted(gains)[len(gains) // 2] if gains else None
        keep = (median_gain is not None and median_gain >= KEEP_LEVER_GAIN and bool(latency_gains)
                and min(latency_gains) > 0 and errors <= base_errors)
        verdict = ("keep" if keep else "do not keep") if gains else f"no verdict (no {HEADLINE_CLIENTS}-client point)"
        added = _new_listeners(graph.sockets, column.sockets)
        lines.append(
            f"- **{COLUMN_LABELS[lever]}** (a graph of its own, same warm-up): " + "; ".join(parts)
            + f"; {errors} failed requests (the graph without it: {base_errors} at the same points). Listening "
            f"sockets it adds to the graph's: {', '.join(added) or 'none'}. By the figures: **{verdict}** (rule: a "
            f"lower p50 excess at 1 client on every workload, a median graph / plain gain of at least "
            f"x{KEEP_LEVER_GAIN:.2f} at {HEADLINE_CLIENTS} clients, no more failures; every ratio against the plain "
            f"app measured beside it, because the background load of this machine changes between the two graphs)."
        )
    return lines


def _new_listeners(before: list[str], after: list[str]) -> list[str]:
    """The listening sockets in `after` beyond those in `before`, compared by (address, process), not port (Ray
    picks ports at random): e.g. "127.0.0.1 (ray::ServeRepli) x1"."""

    def kinds(sockets: list[str]) -> Counter:
        return Counter((s.split(" ", 1)[0].rsplit(":", 1)[0], s.split(" ", 1)[-1]) for s in sockets)

    added = kinds(after) - kinds(before)
    return [f"{host} {process} x{n}" for (host, process), n in sorted(added.items())]
