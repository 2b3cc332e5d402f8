"""The cascade's route by decision (models/decision_route.py): a text goes on only when the second stage's toxic
score could change the action its caller is told."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.decision_route import ROUTE_FILE, CategoryLimits, ScoreShift, action_of, fitted_shift
from models.log_odds import logit

TOXIC = CategoryLimits("toxic", 0.5, 0.85)
INSULT = CategoryLimits("insult", 0.25, 0.83)
LIMITS = (TOXIC, INSULT)


def spread_shift(spread: float = 1.0, min_change: float = 0.03) -> ScoreShift:
    """A shift of `spread` log-odds either side, evenly spread, the same in every bin."""
    levels = np.linspace(0, 1, 41)
    row = np.linspace(-spread, spread, 41)
    return ScoreShift(np.array([-1e6, 0.0, 1e6]), levels, np.stack([row, row]), min_change, "v")


def test_action_follows_policys_rule():
    assert [action_of(s, TOXIC) for s in (0.49, 0.5, 0.84, 0.85)] == [0, 1, 1, 2]


def test_a_text_far_from_every_threshold_has_no_chance_of_change():
    shift = spread_shift(1.0)
    assert shift.change_chance({"toxic": 0.01, "insult": 0.01}, LIMITS) == 0.0
    assert not shift.sends_on({"toxic": 0.01, "insult": 0.01}, LIMITS)


def test_a_text_at_the_review_threshold_goes_on():
    shift = spread_shift(1.0)
    chance = shift.change_chance({"toxic": 0.5, "insult": 0.01}, LIMITS)
    assert chance == pytest.approx(0.5, abs=0.03)  # half the shifts fall below the threshold
    assert shift.sends_on({"toxic": 0.5, "insult": 0.01}, LIMITS)


def test_another_category_blocking_leaves_nothing_to_change():
    shift = spread_shift(3.0)
    assert shift.change_chance({"toxic": 0.5, "insult": 0.9}, LIMITS) == 0.0


def test_another_category_reviewing_leaves_only_the_block_crossing():
    shift = spread_shift(1.0)
    near_review = {"toxic": 0.5, "insult": 0.3}  # insult reviews: toxic moving around 0.5 changes nothing
    assert shift.change_chance(near_review, LIMITS) == 0.0
    near_block = {"toxic": 0.85, "insult": 0.3}
    assert shift.change_chance(near_block, LIMITS) == pytest.approx(0.5, abs=0.03)


def test_a_requests_threshold_moves_where_change_is_possible():
    shift = spread_shift(1.0)
    binary = (CategoryLimits("toxic", 0.9, 0.9), CategoryLimits("insult", 0.9, 0.9))
    assert shift.change_chance({"toxic": 0.5, "insult": 0.01}, binary) < 0.01
    assert shift.change_chance({"toxic": 0.9, "insult": 0.01}, binary) == pytest.approx(0.5, abs=0.03)


def test_no_toxic_limits_means_no_route():
    assert spread_shift().change_chance({"toxic": 0.5}, (INSULT,)) == 0.0


def test_chance_below_is_monotone_and_bounded():
    shift = spread_shift(2.0)
    cuts = np.linspace(0.01, 0.99, 50)
    chances = [shift.chance_below(0.5, cut) for cut in cuts]
    assert chances[0] == 0.0 and chances[-1] == 1.0 and np.all(np.diff(chances) >= 0)


def test_fitted_shift_reads_the_pairs_bin_by_bin():
    rng = np.random.default_rng(0)
    first = 1 / (1 + np.exp(-rng.normal(0, 2, 5000)))
    # The second stage agrees on confident texts, and moves uncertain ones a lot.
    moved = np.where(np.abs(logit(first)) < 1, rng.normal(0, 2, 5000), rng.normal(0, 0.05, 5000))
    second = 1 / (1 + np.exp(-(logit(first) + moved)))
    shift = fitted_shift(first, second, "v", 0.03)
    assert shift.change_chance({"toxic": 0.45}, (TOXIC,)) > 0.3
    assert shift.change_chance({"toxic": 0.05}, (TOXIC,)) < 0.01


def test_a_table_round_trips_and_its_digest_names_it(tmp_path: Path):
    shift = spread_shift(1.0)
    path = tmp_path / ROUTE_FILE
    path.write_text(json.dumps(shift.document()))
    read = ScoreShift.read(path)
    assert read.tag.startswith("dr") and len(read.digest) == 8
    assert read.change_chance({"toxic": 0.5}, (TOXIC,)) == pytest.approx(shift.change_chance({"toxic": 0.5}, (TOXIC,)))
    path.write_text(json.dumps(spread_shift(1.0, min_change=0.05).document()))
    assert ScoreShift.read(path).digest != read.digest


def test_a_malformed_table_is_refused():
    with pytest.raises(ValueError):
        ScoreShift(np.array([0.0, 1.0]), np.linspace(0, 1, 3), np.array([[1.0, 0.0, 2.0]]), 0.03, "v")
    with pytest.raises(ValueError):
        spread_shift(min_change=1.5)


def test_the_shipped_table_routes_the_default_profiles_texts():
    """The shipped table is for the shipped cascade, and sends on a text at toxic's review threshold but not one
    that another category blocks."""
    from models.text_toxicity import DEFAULT_WEIGHTS

    shift = ScoreShift.read(Path(DEFAULT_WEIGHTS).with_name(ROUTE_FILE))
    assert shift.sends_on({"toxic": 0.52, "insult": 0.01}, LIMITS)
    assert not shift.sends_on({"toxic": 0.52, "insult": 0.95}, LIMITS)
    assert not shift.sends_on({"toxic": 0.001, "insult": 0.001}, LIMITS)
