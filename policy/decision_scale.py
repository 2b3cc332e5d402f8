"""A text's place on its profile's primary scale: one number that, compared with the primary category's review and
block thresholds, gives the profile's recommendation over all of its enabled categories.

A profile decides on the strictest of several categories (toxic, insult, identity_attack, threat...), each with its own
thresholds. Each enabled category's score is mapped piecewise linearly onto the primary's (toxic's) scale, its
review threshold onto toxic's review threshold and its block threshold onto toxic's block (0 and 1 stay put); the
highest mapped score is the text's **decision score**. So an account's backtest (adaptation/backtest.py) covers
everything the profile flags with one number per text, and moving the primary's thresholds moves every category's
in step (`thresholds_moved`), the way the strict profile scales the default's.
"""

from __future__ import annotations

from policy.types import PRIMARY_CATEGORIES, CategoryThresholds, ContentKind, Profile


def _to_primary(score: float, own: CategoryThresholds, primary: CategoryThresholds) -> float:
    knots = [(0.0, 0.0), (own.review, primary.review), (own.block, primary.block), (1.0, 1.0)]
    return _through(score, knots)


def _from_primary(value: float, own: CategoryThresholds, primary: CategoryThresholds) -> float:
    knots = [(0.0, 0.0), (primary.review, own.review), (primary.block, own.block), (1.0, 1.0)]
    return _through(value, knots)


def _through(x: float, knots: list[tuple[float, float]]) -> float:
    """The piecewise linear map through `knots` (x non-decreasing); at a repeated x, the last knot's y."""
    x = min(max(x, 0.0), 1.0)
    value = knots[0][1]
    for (x0, y0), (x1, y1) in zip(knots, knots[1:]):
        if x >= x1:
            value = y1
        elif x >= x0:
            value = y0 + (x - x0) / (x1 - x0) * (y1 - y0) if x1 > x0 else y1
            break
    return value


def decision_score(scores: dict[str, float], profile: Profile, kind: ContentKind = "text") -> float:
    """The highest of the enabled categories' scores, each on the primary's scale (a category without a score is
    skipped, as in `policy.decisions.decide`)."""
    primary = profile.categories[PRIMARY_CATEGORIES[kind]]
    return max((_to_primary(scores[c], profile.categories[c], primary)
                for c in profile.enabled_categories(kind) if c in scores), default=0.0)  # fmt: skip


def thresholds_moved(profile: Profile, review: float, block: float, kind: ContentKind = "text") -> Profile:
    """The profile with the primary category's thresholds at `review` and `block`, and every other enabled category
    of `kind` moved to keep its place on the primary's scale (rounded to 4 decimals)."""
    if not 0.0 <= review <= block <= 1.0:
        raise ValueError("thresholds must satisfy 0 <= review <= block <= 1")
    primary = profile.categories[PRIMARY_CATEGORIES[kind]]
    categories = dict(profile.categories)
    for name in profile.enabled_categories(kind):
        own = profile.categories[name]
        categories[name] = own.model_copy(update={"review": round(_from_primary(review, own, primary), 4),
                                                  "block": round(_from_primary(block, own, primary), 4)})
    return profile.model_copy(update={"categories": categories})
