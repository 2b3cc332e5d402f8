"""One markdown table of service against raw model, printed and written with its context to docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from bench.memory import ProcessMemory
from bench.raw import ItemTiming

DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


@dataclass
class Results:
    raw: dict[str, ItemTiming] = field(default_factory=dict)  # workload (and "decode") -> per-item timing, 1 thread
    raw_memory: dict[str, dict[str, float]] = field(default_factory=dict)  # "image" / "text" / "all" -> growth
    sequential_s: dict[str, list[float]] = field(default_factory=dict)  # workload -> request seconds
    throughput: dict[tuple[str, int], float] = field(default_factory=dict)  # (workload, clients) -> requests/s
    replicas_after: dict[tuple[str, int], dict[str, dict[str, int]]] = field(default_factory=dict)
    graph_memory: dict[str, list[ProcessMemory]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # workload -> words for the table
    settings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def table(results: Results) -> str:
    rows = [("measurement", "raw model, 1 thread", "service over HTTP", "service / raw")]
    for name, seconds in results.sequential_s.items():
        raw_s = results.raw[name].batch1_s
        p50, p95 = statistics.median(seconds), _percentile(seconds, 95)
        rows.append((
            f"{results.labels[name]}: latency p50, {len(seconds)} sequential requests",
            f"{_ms(raw_s)} (batch 1)", f"{_ms(p50)} (p95 {_ms(p95)})", _ratio(p50, raw_s),
        ))
    rows.append(("decode one photo to frames (ingress, part of the image latency)", _ms(results.raw["decode"].batch1_s), "", ""))
    for (name, clients), rps in results.throughput.items():
        raw_rps = results.raw[name].batch8_items_per_s
        rows.append((
            f"{results.labels[name]}: throughput, {clients} concurrent clients",
            f"{raw_rps:.1f} items/s (batch 8; {1 / results.raw[name].batch1_s:.1f} at batch 1)",
            f"{rps:.1f} requests/s", _ratio(rps, raw_rps),
        ))
    rows.extend(_memory_rows(results))
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|---|---|---|---|")
    return "\n".join(lines)


def _memory_rows(results: Results) -> list[tuple[str, str, str, str]]:
    raw_of = {"ImageModel": ("image", "3 image models"), "TextModel": ("text", "text model")}
    rows = []
    for group, processes in sorted(results.graph_memory.items(), key=lambda item: -_rss(item[1])):
        rss, pss = _rss(processes), sum(p.pss_mib for p in processes)
        served = f"{rss:.0f} MiB RSS (PSS {pss:.0f}), {len(processes)} process{'es' if len(processes) > 1 else ''}"
        if len({_short_name(p.title) for p in processes}) > 1:
            served += ": " + ", ".join(_short_name(p.title) for p in processes)
        if group in raw_of:
            key, words = raw_of[group]
            growth = results.raw_memory[key]["growth_mib"]
            rows.append((f"memory: {group}", f"{growth:.0f} MiB ({words})", served, _ratio(rss, growth)))
        else:
            rows.append((f"memory: {group}", "", served, ""))
    processes = [p for group in results.graph_memory.values() for p in group]
    rss, pss = _rss(processes), sum(p.pss_mib for p in processes)
    growth = results.raw_memory["all"]["growth_mib"]
    rows.append((
        "memory: whole graph", f"{growth:.0f} MiB (all 4 models, one process)",
        f"{rss:.0f} MiB RSS (PSS {pss:.0f}), {len(processes)} processes", f"{_ratio(rss, growth)} (PSS {_ratio(pss, growth)})",
    ))
    return rows


def document(results: Results, started: datetime, duration_s: float) -> str:
    return "\n".join([
        "# Benchmarks",
        "",
        "Written by `make bench` (`bench/`); do not edit by hand, run it again. Speed and memory of the service are",
        "reported as ratios against the raw models measured in the same run, on the same machine, at the same time.",
        "",
        f"Run of {started.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC, {duration_s:.0f} s in all.",
        "",
        "## Machine",
        "",
        *[f"- {fact}" for fact in machine_facts()],
        "",
        "## Settings",
        "",
        *[f"- {setting}" for setting in results.settings],
        "",
        "## Results",
        "",
        table(results),
        "",
        "## Observed during the run",
        "",
        *[f"- {note}" for note in results.notes],
        "",
    ])


def write_document(text: str) -> None:
    DOC_PATH.write_text(text)


def machine_facts() -> list[str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "?")
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return [
        f"{os.cpu_count()} cores visible, CPU model: {model}",
        f"{memory_kib / 1024 / 1024:.1f} GiB memory; {platform.system()} {platform.release()}",
        f"Python {platform.python_version()}; {_versions()}",
    ]


def load_average() -> str:
    return "/".join(f"{load:.2f}" for load in os.getloadavg())


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{name} {version(name)}" for name in ("ray", "torch", "onnxruntime", "httpx"))


def _rss(processes: list[ProcessMemory]) -> float:
    return sum(p.rss_mib for p in processes)


def _short_name(title: str) -> str:
    """"raylet" for ".../raylet --flags", "log_monitor" for ".../python -u .../log_monitor.py ...", else the title."""
    words = title.split() or ["?"]
    if Path(words[0]).name.startswith("python"):
        return Path(next((w for w in words if w.endswith(".py")), words[0])).stem
    return Path(words[0]).name if words[0].startswith("/") else words[0]


def _percentile(values: list[float], percent: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}"
