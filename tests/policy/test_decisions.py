"""The decision table (README: Decisions), one rule per test."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policy.decisions import decide
from policy.types import CategoryThresholds, Profile


def profile(mode: str = "enforce", **overrides) -> Profile:
    categories = {
        "nsfw": {"review": 0.4, "block": 0.8},
        "weapon": {"enabled": True, "review": 0.5, "block": 0.9},
        "violence": {"enabled": False, "review": 0.3, "block": 0.6},
        "toxic": {"review": 0.5, "block": 0.7},
    }
    categories.update(overrides)
    return Profile(name="p", mode=mode, categories=categories)


@pytest.mark.parametrize(
    ("score", "expected"),
    [(0.0, "allow"), (0.39, "allow"), (0.4, "review"), (0.79, "review"), (0.8, "block"), (1.0, "block")],
)
def test_score_at_or_above_a_threshold_takes_its_action(score, expected):
    result = decide({"nsfw": score}, profile(), "image")
    assert result.recommended_action == expected
    assert result.decision == expected


def test_strictest_enabled_category_decides():
    result = decide({"nsfw": 0.5, "weapon": 0.95}, profile(), "image")
    assert result.recommended_action == "block"
    assert result.blocked_by == ["weapon"]
    assert result.threshold == 0.9


def test_blocked_by_lists_every_category_over_its_block_threshold():
    result = decide({"nsfw": 0.85, "weapon": 0.95}, profile(), "image")
    assert result.blocked_by == ["nsfw", "weapon"]


def test_disabled_category_never_decides():
    result = decide({"nsfw": 0.1, "violence": 0.99}, profile(), "image")
    assert result.recommended_action == "allow"
    assert result.blocked_by == []


def test_threshold_of_an_allow_is_the_primary_category_block_threshold():
    assert decide({"nsfw": 0.1, "weapon": 0.1}, profile(), "image").threshold == 0.8
    assert decide({"toxic": 0.1}, profile(), "text").threshold == 0.7


def test_threshold_of_a_review_is_the_deciding_category_block_threshold():
    result = decide({"nsfw": 0.1, "weapon": 0.6}, profile(), "image")
    assert result.recommended_action == "review"
    assert result.threshold == 0.9


def test_monitor_mode_always_allows_but_recommends_honestly():
    result = decide({"nsfw": 0.99}, profile("monitor"), "image")
    assert result.decision == "allow"
    assert result.recommended_action == "block"
    assert result.mode == "monitor"


@pytest.mark.parametrize(("score", "expected"), [(0.1, "allow"), (0.5, "review"), (0.95, "review")])
def test_review_mode_sends_everything_flagged_to_review(score, expected):
    assert decide({"nsfw": score}, profile("review"), "image").decision == expected


@pytest.mark.parametrize(("score", "expected"), [(0.1, "allow"), (0.5, "review"), (0.95, "block")])
def test_enforce_mode_follows_the_recommendation(score, expected):
    assert decide({"nsfw": score}, profile("enforce"), "image").decision == expected


@pytest.mark.parametrize(("score", "expected"), [(0.29, "allow"), (0.3, "block"), (0.5, "block")])
def test_threshold_override_is_binary_with_no_review_band(score, expected):
    result = decide({"nsfw": score}, profile(), "image", threshold=0.3)
    assert result.recommended_action == expected
    assert result.decision == expected
    assert result.threshold == 0.3


def test_threshold_override_applies_to_every_enabled_category():
    result = decide({"nsfw": 0.1, "weapon": 0.35}, profile(), "image", threshold=0.3)
    assert result.blocked_by == ["weapon"]


def test_review_mode_with_threshold_override_gives_the_binary_recommendation():
    result = decide({"nsfw": 0.95}, profile("review"), "image", threshold=0.5)
    assert result.decision == "block"
    assert decide({"nsfw": 0.2}, profile("review"), "image", threshold=0.5).decision == "allow"


def test_monitor_mode_with_threshold_override_still_allows():
    result = decide({"nsfw": 0.95}, profile("monitor"), "image", threshold=0.5)
    assert result.decision == "allow"
    assert result.recommended_action == "block"


def test_text_is_decided_by_toxic_only():
    result = decide({"toxic": 0.75, "nsfw": 0.99}, profile(), "text")
    assert result.recommended_action == "block"
    assert result.blocked_by == ["toxic"]


def test_review_threshold_above_block_threshold_is_refused():
    with pytest.raises(ValidationError):
        CategoryThresholds(review=0.9, block=0.5)


def test_nsfw_cannot_be_disabled():
    with pytest.raises(ValidationError):
        profile(nsfw={"enabled": False, "review": 0.4, "block": 0.8})
