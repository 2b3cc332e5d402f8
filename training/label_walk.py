"""How a site's moderators label its history, replayed on held-out rows: the walk that training/eval_site.py and the
experiments on a site's line (training/experiments/site_features_probe.py, site_knn_probe.py) share.

Each site's rows are shuffled by its seed and cut in two halves (`halves`): the first is its history, the second its
future. The history is walked in order (`walk`), as a site's queue would label it: a row its profile sends to
review is a `flagged` label (rate 1); an allowed row is audited with probability AUDIT_RATE (its rate); an allowed
harmful row not audited is reported with probability REPORT_RATE (rate 1: nobody knows how many misses go
unreported). The walk stops at n labels, or at the end of the history; a site whose history gives fewer than n
labels does not count for n (`replay`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

AUDIT_RATE, REPORT_RATE = 0.1, 0.3
# The walk draws from its own stream, apart from the halves' permutation (seed itself).
_WALK_SEED_OFFSET = 1000


@dataclass(frozen=True)
class Walk:
    rows: list[int]  # the labelled rows, in the order they were seen
    seen: list[str]  # how each was seen: "flagged", "audit" or "report"
    rates: list[float]  # the chance that a row like it was seen that way
    at: list[int]  # its place in the history, from 1
    taken: int  # history rows walked: up to the n-th label, or all of them


def halves(rows: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A site's rows shuffled by `seed`: (history, future), the first half and the rest."""
    order = np.random.default_rng(seed).permutation(rows)
    return order[: len(order) // 2], order[len(order) // 2:]


def walk_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(_WALK_SEED_OFFSET + seed)


def walk(flagged, harmful, history: np.ndarray, n: int, rng: np.random.Generator) -> Walk:
    """The labels the site's queue gives while its history is walked, until n of them. `flagged[i]`: whether row i
    is sent to review; `harmful[i]`: its true label."""
    rows, seen, rates, at = [], [], [], []
    for taken, i in enumerate(history, start=1):
        if flagged[i]:
            how, rate = "flagged", 1.0
        elif rng.random() < AUDIT_RATE:
            how, rate = "audit", AUDIT_RATE
        elif harmful[i] and rng.random() < REPORT_RATE:
            how, rate = "report", 1.0
        else:
            continue
        rows.append(i)
        seen.append(how)
        rates.append(rate)
        at.append(taken)
        if len(rows) == n:
            return Walk(rows, seen, rates, at, taken)
    return Walk(rows, seen, rates, at, len(history))


SiteRun = Callable[[np.ndarray, np.ndarray, int, int], dict | None]


def replay(sites: dict[str, np.ndarray], seeds: int, sizes, site_run: SiteRun,
           after_site: Callable[[str, np.ndarray, float], None] | None = None) -> dict[int, dict[str, list[dict]]]:
    """Every site, seed and number of labels n: `site_run(history, future, n, seed)`, kept per n and site where it
    gives a run (None: the history gave fewer than n labels). `after_site(name, rows, seconds)` follows each site."""
    runs: dict[int, dict[str, list[dict]]] = {n: {} for n in sizes}
    for name, rows in sites.items():
        started = time.time()
        for seed in range(seeds):
            history, future = halves(rows, seed)
            for n in sizes:
                run = site_run(history, future, n, seed)
                if run is not None:
                    runs[n].setdefault(name, []).append(run)
        if after_site is not None:
            after_site(name, rows, time.time() - started)
    return runs
