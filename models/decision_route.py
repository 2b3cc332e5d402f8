"""Routing the text cascade by decision: a text goes on to the second stage when its answer could change what the
caller is told.

A caller is told an action (allow, review, block), decided by the strictest of the profile's enabled text
categories at their thresholds (policy/decisions.py). The second stage rescores `toxic` alone, so sending a text on
pays only when a new toxic score could move that action:

- when another category already blocks, nothing toxic does can change the answer: never sent;
- when another category already reviews, only toxic crossing its block threshold can: sent if that is likely enough;
- otherwise toxic decides alone, and any crossing of its review or block threshold counts.

How likely a crossing is comes from real dev comments (`training/decision_route.py`): for each bin of the first
stage's calibrated toxic log-odds, the quantiles of the *shift* to the second stage's calibrated toxic log-odds on the
same text (`ScoreShift`). The chance that the second stage's score lands in an interval is read off those quantiles
(linear between them). A text goes on when that chance of a different action is at least `min_change`, chosen on
dev by the decisions it produces (recall and benign flagged at review, precision at block, against the second stage
on every text) and reported on the test split, which it never saw.

The table is pooled over every language: most languages have a single labelled source here, and a share per
language chosen on one source's estimate is noise larger than the gain it decides. Each stage's per-language
calibration already puts every language's scores on the thresholds' common scale.

Pure numpy: the first stage calls `change_chance` per text with the caller's `DecidingLimits` (what
moderation/items.py derives from the profile and the request's `?threshold`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.log_odds import logit

ROUTE_FILE = "cascade-decision-route.json"
ROUTED_CATEGORY = "toxic"
_SEVERITY = {"allow": 0, "review": 1, "block": 2}


@dataclass(frozen=True)
class CategoryLimits:
    """One enabled text category's thresholds as the caller's decision applies them (a request's `?threshold`
    already in both: review == block)."""

    category: str
    review: float
    block: float


DecidingLimits = tuple[CategoryLimits, ...]

# The limits of a text whose answer decides nothing, not even a client's own cut: a comment's span (Perspective's
# spanScores, highlights inside a comment scored whole beside them), or a text of a profile with no text category
# enabled. The cascade never sends one on: a comment's up to 100 sentences would cost the second stage up to twelve
# times the 8 windows of the comment itself, for highlights.
DECIDES_NOTHING: DecidingLimits = ()


def action_of(score: float, limits: CategoryLimits) -> int:
    """0 allow, 1 review, 2 block: policy.decisions.recommend's rule, as a severity."""
    if score >= limits.block:
        return 2
    return 1 if score >= limits.review else 0


@dataclass(frozen=True)
class ScoreShift:
    """Per bin of the first stage's calibrated toxic log-odds (`bin_edges`, increasing; the outer bins reach to
    infinity), the quantiles at `levels` of logit(second stage's calibrated toxic) - logit(first stage's)."""

    bin_edges: np.ndarray  # (bins + 1,)
    levels: np.ndarray  # (quantiles,), 0 ... 1 increasing
    shifts: np.ndarray  # (bins, quantiles), each row non-decreasing
    min_change: float  # a text goes on when its chance of a different action is at least this
    model_version: str  # the cascade's first stage and second stage the shifts were measured between
    digest: str = ""

    def __post_init__(self) -> None:
        if self.shifts.shape != (len(self.bin_edges) - 1, len(self.levels)):
            raise ValueError("a score shift holds one row of quantiles per bin")
        if np.any(np.diff(self.bin_edges) <= 0) or np.any(np.diff(self.shifts, axis=1) < 0):
            raise ValueError("bin edges must increase and each bin's quantiles must not decrease")
        if not 0.0 <= self.min_change <= 1.0:
            raise ValueError(f"min_change must be in 0..1, not {self.min_change}")

    @classmethod
    def read(cls, path: Path) -> "ScoreShift":
        raw = Path(path).read_bytes()
        document = json.loads(raw)
        return cls(np.array(document["bin_edges"], dtype=np.float64), np.array(document["levels"], dtype=np.float64),
                   np.array(document["shifts"], dtype=np.float64), float(document["min_change"]),
                   document["model_version"], hashlib.sha256(raw).hexdigest()[:8])  # fmt: skip

    def document(self, **extra) -> dict:
        return {"model_version": self.model_version, "min_change": self.min_change,
                "bin_edges": [round(float(e), 4) for e in self.bin_edges],
                "levels": [round(float(q), 4) for q in self.levels],
                "shifts": [[round(float(s), 4) for s in row] for row in self.shifts], **extra}

    @property
    def tag(self) -> str:
        """`dr<digest>`: part of the cascade's model_version, so a new table is a new version."""
        return f"dr{self.digest}"

    def chance_below(self, first: float, cut: float) -> float:
        """P(second stage's score < cut) for a text the first stage scored `first` (both calibrated)."""
        if cut <= 0.0:
            return 0.0
        if cut > 1.0:
            return 1.0
        start = float(logit(first))
        row = self.shifts[int(np.clip(np.searchsorted(self.bin_edges, start, side="right") - 1, 0,
                                      len(self.shifts) - 1))]  # fmt: skip
        needed = float(logit(cut)) - start
        if needed <= row[0]:
            return float(self.levels[0])
        if needed > row[-1]:
            return float(self.levels[-1])
        # The share of shifts below `needed`: the levels interpolated over the (possibly repeated) quantiles.
        return float(np.interp(needed, row, self.levels))

    def change_chance(self, scores: dict[str, float], limits: DecidingLimits) -> float:
        """The chance that replacing `scores[toxic]` by the second stage's score changes the caller's action."""
        toxic_limits = next((one for one in limits if one.category == ROUTED_CATEGORY), None)
        if toxic_limits is None or ROUTED_CATEGORY not in scores:
            return 0.0
        others = max((action_of(scores[one.category], one) for one in limits
                      if one.category != ROUTED_CATEGORY and one.category in scores), default=0)  # fmt: skip
        first = scores[ROUTED_CATEGORY]
        now = max(others, action_of(first, toxic_limits))
        below_review = self.chance_below(first, toxic_limits.review)
        below_block = self.chance_below(first, toxic_limits.block)
        chances = (below_review, max(0.0, below_block - below_review), max(0.0, 1.0 - below_block))
        return float(sum(chance for toxic_action, chance in enumerate(chances) if max(others, toxic_action) != now))

    def sends_on(self, scores: dict[str, float], limits: DecidingLimits) -> bool:
        return self.change_chance(scores, limits) >= self.min_change


def fitted_shift(first: np.ndarray, second: np.ndarray, model_version: str, min_change: float, *,
                 bin_width: float = 0.5, min_rows: int = 40, levels: int = 41) -> ScoreShift:  # fmt: skip
    """The shift table of paired calibrated toxic scores (`first`, `second`: the same texts through each stage):
    bins of `bin_width` log-odds over the first stage's range, each widened to its neighbours until it holds at
    least `min_rows` texts (the table's tails are thin), and the shift's quantiles at `levels` even levels."""
    start, shift = logit(np.asarray(first, np.float64)), logit(np.asarray(second, np.float64)) - logit(
        np.asarray(first, np.float64))
    low, high = np.floor(np.quantile(start, 0.005)), np.ceil(np.quantile(start, 0.995))
    edges = np.arange(low, high + bin_width / 2, bin_width)
    edges[0], edges[-1] = -np.inf, np.inf
    at = np.linspace(0.0, 1.0, levels)
    rows = []
    for index in range(len(edges) - 1):
        lo, hi = index, index + 1
        inside = (start >= edges[lo]) & (start < edges[hi])
        while inside.sum() < min_rows and (lo > 0 or hi < len(edges) - 1):
            lo, hi = max(0, lo - 1), min(len(edges) - 1, hi + 1)
            inside = (start >= edges[lo]) & (start < edges[hi])
        rows.append(np.quantile(shift[inside], at) if inside.any() else np.zeros(levels))
    finite = edges.copy()
    finite[0], finite[-1] = -1e6, 1e6  # JSON holds no infinity; beyond any logit of a clipped score
    return ScoreShift(finite, at, np.maximum.accumulate(np.array(rows), axis=1), float(min_change), model_version)
