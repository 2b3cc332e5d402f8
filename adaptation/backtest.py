"""A profile's thresholds replayed on an account's labels: estimated recall and benign-flagged share at its review
and block thresholds, and the thresholds that would meet a target benign-flagged share.

The labels are a sample of the account's traffic, not the traffic: every flagged text is seen (rate 1), allowed
texts are audited at a known rate. Weighting each label by 1/rate (Horvitz-Thompson) turns them back into an
estimate of the traffic: an audited fine text at rate 0.1 stands for ten allowed fine texts.

Reports are left out of the estimate whenever the account has audit labels: the audits already estimate the misses
among allowed texts (weighted up), and a reported miss counted beside them would be counted twice. Without any
audit, the reports (weight 1 each) are the only view of the misses; recall is then an upper bound (unreported
misses are unknown) and is said to be so by `reports_used`.

`scores[i]` is the probability that label i's text would be served now (corrected or not: the caller decides; for
a live correction, prefer the out-of-fold scores `FitReport.out_of_fold` gives: on the labels it was fitted on, the
correction looks better than it is).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from adaptation.labels import Label

CURVE = tuple(round(0.01 * i, 2) for i in range(1, 100))
BLOCK_SHARE = 0.1
# The suggestion takes the lowest threshold whose share's upper bound at Z standard errors meets the target, not its
# point estimate: the lowest threshold that meets it on the labels is picked for their luck (on each dataset of
# training/eval_site.py as a site, the point estimate gave a mean of 14% benign flagged on the future texts for a 10%
# target, 22% at worst; Z = 0.5 gave 8.5%, 18% at worst with 50 labels and 9% at worst with 200; Z = 1 about 3%, at
# the cost of half the recall).
Z = 0.5  # the suggested block threshold flags at most a tenth of the review target's benign share


@dataclass(frozen=True)
class OperatingPoint:
    threshold: float
    recall: float | None  # estimated share of the harmful traffic at or above the threshold (None: no harmful label)
    benign_flagged: float | None  # estimated share of the fine traffic at or above it (None: no fine label)


@dataclass(frozen=True)
class Backtest:
    labels: int  # all labels given, reports included
    harmful: int  # among the labels the estimate uses
    fine: int
    by_seen: dict[str, int]  # all labels given, by how they were seen
    target_benign_flagged: float
    review: OperatingPoint | None
    block: OperatingPoint | None
    suggested_thresholds: dict[str, float] | None  # {"review": ..., "block": ...}
    suggested_review: OperatingPoint | None
    curve: list[OperatingPoint]
    reason: str | None  # why (some of) it cannot be estimated
    reports_used: bool = False  # no audit labels: reports stand in for the misses (recall is then optimistic)
    suggested_block: OperatingPoint | None = None

    def document(self) -> dict:
        return _rounded(asdict(self))


def backtest(scores: np.ndarray, labels: Sequence[Label], *, review: float, block: float,
             target_benign_flagged: float = 0.10, z: float = Z) -> Backtest:
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    by_seen: dict[str, int] = {}
    for label in labels:
        by_seen[label.seen] = by_seen.get(label.seen, 0) + 1
    reports_used = not by_seen.get("audit")
    kinds = ("flagged", "audit", "report") if reports_used else ("flagged", "audit")
    used = np.array([label.seen in kinds for label in labels], dtype=bool)
    s = scores[used]
    y = np.array([label.harmful for label in labels], dtype=bool)[used]
    w = np.array([label.weight for label in labels], dtype=np.float64)[used]
    harmful, fine = int(y.sum()), int((~y).sum())
    empty = dict(labels=len(labels), harmful=harmful, fine=fine, by_seen=by_seen,
                 target_benign_flagged=target_benign_flagged, reports_used=bool(reports_used and used.any()))
    if not used.any():
        return Backtest(**empty, review=None, block=None, suggested_thresholds=None, suggested_review=None, curve=[],
                        reason="No labels yet: nothing to estimate.")
    point = _estimator(s, y, w)
    reason = None
    suggested = suggested_point = block_point = None
    if fine == 0:
        reason = "No fine labels: the benign-flagged share cannot be estimated, so no thresholds are suggested."
    else:
        candidates = _candidates(s)
        low = _lowest(candidates, s, y, w, target_benign_flagged, 0.0, z)
        high = _lowest(candidates, s, y, w, target_benign_flagged * BLOCK_SHARE, low, z)
        suggested, suggested_point, block_point = {"review": low, "block": high}, point(low), point(high)
        if harmful == 0:
            reason = "No harmful labels: recall cannot be estimated."
        elif suggested_point.benign_flagged > target_benign_flagged:
            reason = (f"No threshold meets the target: {suggested_point.benign_flagged:.0%} of fine texts are flagged "
                      "even at 1.0 (by the profile's other categories, or a score of 1.0).")
    return Backtest(**empty, review=point(review), block=point(block), suggested_thresholds=suggested,
                    suggested_review=suggested_point, curve=[point(t) for t in CURVE], reason=reason,
                    suggested_block=block_point)


def _estimator(s: np.ndarray, y: np.ndarray, w: np.ndarray):
    total_harmful, total_fine = w[y].sum(), w[~y].sum()

    def point(threshold: float) -> OperatingPoint:
        above = s >= threshold
        recall = float(w[y & above].sum() / total_harmful) if total_harmful > 0 else None
        benign = float(w[~y & above].sum() / total_fine) if total_fine > 0 else None
        return OperatingPoint(float(threshold), recall, benign)

    return point


def _candidates(s: np.ndarray) -> np.ndarray:
    """The labels' distinct scores rounded up to 4 decimals (rounding up never flags a label the exact score would
    not), and the next 4-decimal step above them all (flags no label), within [0, 1]."""
    up = np.ceil(np.unique(s) * 1e4 - 1e-9) / 1e4
    return np.unique(np.clip(np.r_[up, up.max() + 1e-4], 0.0, 1.0))


def _lowest(candidates: np.ndarray, s: np.ndarray, y: np.ndarray, w: np.ndarray, target: float, floor: float,
            z: float) -> float:
    """The lowest candidate >= floor whose benign-flagged share is at most target (1.0 if none is): its Wilson upper
    bound at z standard errors, on the fine labels' effective number (Kish: (sum w)^2 / sum w^2)."""
    order = np.argsort(s[~y], kind="mergesort")
    fine_scores, fine_weights = s[~y][order], w[~y][order]
    below = np.r_[0.0, np.cumsum(fine_weights)]  # fine weight strictly below each candidate, via searchsorted
    share = 1.0 - below[np.searchsorted(fine_scores, candidates, side="left")] / fine_weights.sum()
    share = _wilson_upper(np.clip(share, 0.0, 1.0), fine_weights.sum() ** 2 / np.sum(fine_weights ** 2), z)
    meeting = np.where((candidates >= floor) & (share <= target + 1e-12))[0]
    return round(float(candidates[meeting[0]]), 4) if len(meeting) else 1.0


def _wilson_upper(p: np.ndarray, n: float, z: float) -> np.ndarray:
    if z <= 0:
        return p
    centre = p + z * z / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + spread) / (1 + z * z / n)


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
