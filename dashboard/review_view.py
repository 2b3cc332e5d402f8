"""What the item page shows of an item's scores: each category's score beside its profile's thresholds."""

from __future__ import annotations

from dataclasses import dataclass

from policy.decisions import recommend
from policy.types import Profile, ReviewItem


@dataclass(frozen=True)
class ScoredCategory:
    name: str
    score: float
    review: float | None  # None when the profile does not have (or no longer has) the category
    block: float | None

    @property
    def verdict(self) -> str:
        """The profile's recommendation for this score (policy/decisions.py), or "" when the profile lacks it."""
        if self.review is None or self.block is None:
            return ""
        return recommend(self.score, self.review, self.block)


def score_rows(item: ReviewItem, profile: Profile | None = None) -> list[ScoredCategory]:
    """Highest score first, each with the thresholds of the profile that decided the item (as it stands now)."""
    rows = []
    for name, score in sorted(item.scores.items(), key=lambda pair: -pair[1]):
        limits = profile.categories.get(name) if profile else None
        rows.append(ScoredCategory(name, score, limits.review if limits else None, limits.block if limits else None))
    return rows
