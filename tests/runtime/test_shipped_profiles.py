"""The profiles shipped in config/: the text thresholds are the model's, beta categories are off."""

from __future__ import annotations

import json

import pytest

from policy.types import BETA_CATEGORIES, TEXT_CATEGORIES
from runtime.bootstrap import load_profiles
from runtime.settings import PROJECT_ROOT

PROFILES = {profile.name: profile for profile in load_profiles(PROJECT_ROOT / "config")}
CHOSEN = json.loads((PROJECT_ROOT / "models/weights/text/thresholds.json").read_text())
THRESHOLDS, JOINT = CHOSEN["categories"], CHOSEN["default_profile"]


@pytest.mark.parametrize("category", TEXT_CATEGORIES)
def test_default_text_thresholds_are_the_ones_chosen_on_real_dev_data(category):
    chosen = PROFILES["default"].categories[category]
    review = JOINT["review"][category] if category in JOINT["categories"] else THRESHOLDS[category]["review"]
    assert (chosen.review, chosen.block) == pytest.approx((review, THRESHOLDS[category]["block"]))


def test_the_default_profile_enables_exactly_the_categories_its_review_thresholds_were_chosen_for():
    assert set(PROFILES["default"].enabled_categories("text")) == set(JOINT["categories"])
    assert "threat" in JOINT["categories"]  # out of beta, on by default


def test_the_joint_operating_point_held_on_the_held_out_split():
    assert JOINT["dev"]["benign_flagged"] <= JOINT["max_benign_flagged"]
    assert JOINT["test"]["benign_flagged"] <= JOINT["max_benign_flagged"]
    # The recall chosen on dev holds on the held-out test split. (The 0.75 target is reported, met or missed, in the
    # model card: on the corpus as it grew it is missed.)
    assert abs(JOINT["test"]["recall"] - JOINT["dev"]["recall"]) <= 0.03


def test_every_served_text_category_has_thresholds_in_every_profile():
    for profile in PROFILES.values():
        assert set(THRESHOLDS) <= set(profile.categories), profile.name


def test_the_model_and_the_policy_agree_on_which_text_categories_are_beta():
    assert {c for c, t in THRESHOLDS.items() if t["beta"]} == set(BETA_CATEGORIES) & set(TEXT_CATEGORIES)


@pytest.mark.parametrize("name", ["default", "monitor"])
def test_no_beta_category_is_on_in_the_everyday_profiles(name):
    assert not set(PROFILES[name].enabled_categories("image") + PROFILES[name].enabled_categories("text")) & set(
        BETA_CATEGORIES
    )
