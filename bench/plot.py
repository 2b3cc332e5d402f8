"""docs/benchmarks.png: throughput and p99 against concurrency, one panel per workload, the three columns
(graph, plain app, raw limit) and any lever measured. matplotlib comes from the `bench` extra."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bench.limit import with_decoding
from bench.report import COLUMN_LABELS, LABELS, Results

PNG_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.png"
STYLES = {"graph": "o-", "plain": "s-", "throughput_optimized": "^--", "haproxy": "v--", "without_cascade": "d--"}


def write(results: Results, path: Path = PNG_PATH) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(results.columns["graph"].points)
    figure, axes = plt.subplots(2, len(workloads), figsize=(4.2 * len(workloads), 7), squeeze=False)
    for index, name in enumerate(workloads):
        top, bottom = axes[0][index], axes[1][index]
        for column_name, column in results.columns.items():
            points = column.points.get(name, [])
            if not points:
                continue
            xs = [p.concurrency for p in points]
            label = COLUMN_LABELS.get(column_name, column_name)
            top.plot(xs, [p.rps for p in points], STYLES.get(column_name, ".-"), label=label)
            bottom.plot(xs, [p.p99_s * 1000 for p in points], STYLES.get(column_name, ".-"), label=label)
        if name in results.limit:
            top.axhline(results.limit[name].items_per_s, color="black", linestyle=":",
                        label=f"raw limit, {results.cores} processes")
            top.axhline(results.limit_one[name].items_per_s, color="grey", linestyle=":", label="raw, 1 thread")
        if with_decoding(name) in results.limit:
            top.axhline(results.limit[with_decoding(name)].items_per_s, color="black", linestyle="-.",
                        label=f"raw limit with decoding, {results.cores} processes")
        top.set_title(textwrap.fill(LABELS[name], 48), fontsize=8)  # long labels, several panels side by side
        top.set_ylabel("requests/s")
        bottom.set_ylabel("p99 latency (ms)")
        bottom.set_yscale("log")
        for axis in (top, bottom):
            axis.set_xscale("log", base=2)
            axis.set_xticks(list(results.plan.concurrency), [str(c) for c in results.plan.concurrency])
            axis.set_xlabel("concurrent clients")
            axis.grid(True, alpha=0.3)
        top.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=7)
    figure.suptitle(f"make bench, {results.cores} cores (shared machine)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
