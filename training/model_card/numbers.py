"""How the card writes a figure: three decimals or a percentage, "n/a" where it is missing or NaN."""

from __future__ import annotations


def figure(value, digits=3) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def percent(value) -> str:
    return "n/a" if value is None or value != value else f"{100 * value:.0f}%"


def mean_of_known(values) -> float:
    values = [v for v in values if v is not None and v == v]
    return sum(values) / len(values) if values else float("nan")


def recall_and_flagged(f: dict) -> str:
    return f"{figure(f['recall'], 2)} / {percent(f['benign_flagged'])}"
