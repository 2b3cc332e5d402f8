"""The figures every section compares: a point at a client count, a column against the plain app measured beside
it, and the `bench: ...` ratio line a script reads (the page's last line)."""

from __future__ import annotations

from bench.load import Point
from bench.report.results import Results

HEADLINE_CLIENTS = 16
RATIO_KEYS = {"image_vs_plain": "image_default", "strict_vs_plain": "image_strict", "phone_vs_plain": "image_phone",
              "text_vs_plain": "text"}


def point_at(points: list[Point], concurrency: int) -> Point | None:
    return next((p for p in points if p.concurrency == concurrency), None)


def plain_reference(results: Results, workload: str, column: str = "graph") -> list[Point]:
    """The plain app's points measured side by side with `column` (the graph's are the plain column itself)."""
    beside = getattr(results.columns[column], "plain_beside", None) if column != "graph" else None
    return (beside or results.columns["plain"].points).get(workload, [])


def throughput_ratio(results: Results, workload: str, column: str = "graph", clients: int = HEADLINE_CLIENTS):
    ours = point_at(results.columns[column].points.get(workload, []), clients)
    plain = point_at(plain_reference(results, workload, column), clients)
    return ours.rps / plain.rps if ours and plain and plain.rps else None


def p50_excess(results: Results, workload: str, column: str = "graph") -> float | None:
    """Seconds the p50 at concurrency 1 is above the plain app's measured beside it."""
    ours = point_at(results.columns[column].points.get(workload, []), 1)
    plain = point_at(plain_reference(results, workload, column), 1)
    return ours.p50_s - plain.p50_s if ours and plain else None


def format_ratio_line(ratios: dict[str, float | None]) -> str:
    return "bench: " + " ".join(f"{key}={'n/a' if value is None else f'{value:.2f}'}" for key, value in ratios.items())


def ratio_line(results: Results) -> str:
    return format_ratio_line({key: throughput_ratio(results, workload) for key, workload in RATIO_KEYS.items()})
