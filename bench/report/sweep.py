"""The page's "Results" section: every point of the graph beside the plain app's and the raw limit (the table
a run also prints at its end), and the raw limit's own table."""

from __future__ import annotations

from bench.limit import served_workload
from bench.report.labels import LABELS
from bench.report.markdown import latencies, ms, rps, table
from bench.report.ratios import HEADLINE_CLIENTS, point_at
from bench.report.results import Results


def section(results: Results) -> list[str]:
    return ["## Results", "", tables(results), "", "### The raw limit", "", limit_table(results), ""]


def tables(results: Results) -> str:
    graph, plain = results.columns["graph"], results.columns["plain"]
    rows = [("workload", "clients", "graph req/s", "graph p50 / p95 / p99 ms", "plain req/s",
             "plain p50 / p95 / p99 ms", "graph / plain", f"raw limit ({results.cores} proc.) items/s")]
    for name, points in graph.points.items():
        limit = results.limit.get(name)
        for ours in points:
            theirs = point_at(plain.points.get(name, []), ours.concurrency)
            rows.append((
                LABELS[name], str(ours.concurrency), rps(ours), latencies(ours),
                rps(theirs), latencies(theirs),
                f"{ours.rps / theirs.rps:.2f}" if theirs and theirs.rps else "",
                f"{limit.items_per_s:.1f}" if limit else "",
            ))
    return table(rows)


def limit_table(results: Results) -> str:
    rows = [("workload", "1 process: items/s (batch 8)", "1 process: one item alone",
             f"{results.cores} processes: items/s (batch 8)", "graph req/s at 16 clients / limit")]
    for name, one in results.limit_one.items():
        many = results.limit[name]
        ours = point_at(results.columns["graph"].points.get(served_workload(name), []), HEADLINE_CLIENTS)
        rows.append((LABELS[name], f"{one.items_per_s:.1f}", ms(one.batch1_s), f"{many.items_per_s:.1f}",
                     f"{ours.rps / many.items_per_s:.2f}" if ours else ""))
    return table(rows)
