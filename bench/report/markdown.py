"""How the page writes things: a Markdown table, a cell of milliseconds, requests a second or percentiles, a target's
verdict, and the prose of prose/*.md with a run's values in it."""

from __future__ import annotations

from pathlib import Path
from string import Template

from bench.load import Point

PROSE_DIR = Path(__file__).resolve().parent / "prose"


def prose(name: str, **values: str) -> list[str]:
    """prose/<name>.md, its `$value`s replaced (each one given, or this fails; the prose's own `$` is written `$$`),
    as the page's lines."""
    text = (PROSE_DIR / f"{name}.md").read_text()
    return Template(text.removesuffix("\n")).substitute(values).split("\n")


def table(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * len(rows[0]))
    return "\n".join(lines)


def verdict(met: bool, missed: str) -> str:
    return "**met**" if met else f"**not met**, {missed}"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def rps(point: Point | None) -> str:
    if point is None:
        return ""
    return f"{point.rps:.1f}" + (f" ({point.errors} failed: {', '.join(map(str, point.statuses))})" if point.errors else "")


def latencies(point: Point | None) -> str:
    if point is None:
        return ""
    return " / ".join(f"{value * 1000:.1f}" for value in (point.p50_s, point.p95_s, point.p99_s))
