"""The joint choice of the default profile's review thresholds (training/profile_thresholds.py `choose`), on
synthetic scores: the best recall under the bound, the fixed categories' flags counted in the union, and the
fewest flags when no combination is within the bound."""

from __future__ import annotations

import numpy as np

from training.metrics import review_threshold
from training.profile_thresholds import MAX_BENIGN_FLAGGED, PROFILE_CATEGORIES, RATES, choose, flagged


def _scores(seed: int = 0, n: int = 2000):
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(int)
    scores = {c: np.clip(rng.normal(0.3 + 0.4 * labels, 0.15), 0, 1) for c in PROFILE_CATEGORIES}
    return scores, labels


def test_the_chosen_thresholds_keep_the_union_of_benign_flags_within_the_bound():
    scores, labels = _scores()
    review = choose(scores, labels)
    hit = flagged(scores, review)
    assert set(review) == set(PROFILE_CATEGORIES)
    assert hit[labels == 0].mean() <= MAX_BENIGN_FLAGGED
    assert hit[labels == 1].mean() > 0.5  # a real search, not the strictest corner


def test_a_fixed_categorys_flags_count_in_the_union_and_are_not_searched():
    scores, labels = _scores()
    # "threat" flags 8% of benign rows (and no toxic one) on its own at its fixed threshold.
    benign = np.where(labels == 0)[0]
    scores["threat"] = np.zeros(len(labels))
    scores["threat"][benign[: int(0.08 * len(benign))]] = 1.0
    fixed = {"threat": 0.5}
    alone, together = choose(scores, labels), choose(scores, labels, fixed=fixed)
    assert "threat" not in together
    assert flagged(scores, {**together, **fixed})[labels == 0].mean() <= MAX_BENIGN_FLAGGED
    # The searched categories must leave room for threat's flags: ignoring them would break the bound.
    assert flagged(scores, {**alone, **fixed})[labels == 0].mean() > MAX_BENIGN_FLAGGED
    assert flagged(scores, together)[labels == 1].mean() < flagged(scores, alone)[labels == 1].mean()


def test_when_no_combination_is_within_the_bound_the_one_that_flags_fewest_is_chosen():
    scores, labels = _scores()
    fixed = {"threat": 0.5}
    scores["threat"] = np.where(labels == 0, 1.0, 0.0)  # flags every benign row: nothing can meet the bound
    review = choose(scores, labels, fixed=fixed)
    # Fewest flags: each searched category at the lowest benign-flag rate the search tries.
    benign = labels == 0
    assert review == {c: round(review_threshold(scores[c][benign], min(RATES)), 4) for c in PROFILE_CATEGORIES}
