"""The page's "Settings" section: how the run was set up, from its plan (the wording: prose/settings.md)."""

from __future__ import annotations

from bench import cascade
from bench.limit import BATCH
from bench.report.markdown import prose
from bench.report.results import Results
from bench.report.targets import PAIRED_THROUGHPUT_CLIENTS


def section(results: Results) -> list[str]:
    return ["## Settings", "", *settings(results), ""]


def settings(results: Results) -> list[str]:
    """The Settings section's list, one item a line."""
    plan = results.plan
    levers = ", ".join(results.levers) or "none this run"
    if cascade.LEVER in results.levers:
        levers += f" ({cascade.LEVER}: on the text workloads only)"
    return prose(
        "settings",
        models=", ".join(f"{task}={version}" for task, version in results.versions.items()),
        batch=str(BATCH), limit_s=f"{plan.limit_s:.0f}", cores=str(results.cores),
        min_requests=str(plan.min_requests), max_point_s=f"{plan.max_point_s:.0f}",
        concurrency=", ".join(map(str, plan.concurrency)),
        warm_round_s=f"{plan.warm_round_s:.0f}", settle_max_s=f"{plan.settle_max_s:.0f}",
        overload_rounds=str(plan.overload_rounds), pair_rounds=str(getattr(plan, "pair_rounds", 0)),
        paired_clients=", ".join(map(str, PAIRED_THROUGHPUT_CLIENTS)),
        lever_concurrency=", ".join(map(str, plan.lever_concurrency)), levers=levers,
    )
