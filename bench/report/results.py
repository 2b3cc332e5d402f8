"""What one run measured, as the page reads it (`Results`, pickled by every run), and an earlier run's part of it
shown beside (`Baseline`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from bench.limit import Limit
from bench.load import Point


@dataclass
class Results:
    plan: Any
    versions: dict[str, str]
    cores: int
    levers: list[str]
    load_before: str
    load_after: str = ""
    limit_one: dict[str, Limit] = field(default_factory=dict)
    limit: dict[str, Limit] = field(default_factory=dict)
    decode_s: float = 0.0
    columns: dict[str, Any] = field(default_factory=dict)  # "graph", "plain", lever name -> run.Column
    hops: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    lever_failures: dict[str, str] = field(default_factory=dict)
    started: datetime | None = None
    duration_s: float = 0.0
    hash_bank: Any = None  # bench.hash_bank.HashBankResults (a run saved before it existed has none)
    adaptation: Any = None  # bench.adaptation.AdaptationResults (likewise)
    profile: Any = None  # bench.cpu.Profile of the plain app's event loop, short text
    baseline: Baseline | None = None  # an earlier run's graph, shown beside this one (`--baseline`)


@dataclass(frozen=True)
class Baseline:
    """What the page shows of an earlier run (`python -m bench.run --baseline PICKLE`): its graph's points, its CPU
    readings, its raw limit, and what it was."""

    label: str  # e.g. "run of 2026-11-27 06:44 UTC (commit 59aca86)"
    points: dict[str, list[Point]]
    plain_points: dict[str, list[Point]]
    limit: dict[str, Limit]
    cpu: dict[int, Any]  # clients -> bench.cpu.CpuReading of its graph
    cpu_image: dict[int, Any] = field(default_factory=dict)  # the same, nsfw images


def baseline_of(earlier: Results, what: str) -> Baseline:
    started = earlier.started.astimezone(timezone.utc) if earlier.started else None
    when = f"run of {started:%Y-%m-%d %H:%M} UTC" if started else "an earlier run"
    graph, plain = earlier.columns["graph"], earlier.columns["plain"]
    return Baseline(label=f"{when} ({what})" if what else when, points=graph.points, plain_points=plain.points,
                    limit=earlier.limit, cpu=getattr(graph, "cpu", {}).get("graph", {}),
                    cpu_image=getattr(graph, "cpu_image", {}).get("graph", {}))
