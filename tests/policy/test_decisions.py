"""The decision table (README: Decisions), one rule per test."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policy.decisions import decide, on_scale_of, recommend, strictest_text_score
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


SCALES = [(0.5172, 0.8424, 0.6, 0.9), (0.0192, 1.0, 0.5172, 0.8424), (0.2438, 0.8311, 0.2438, 0.8311),
          (0.0, 0.7, 0.4, 0.8), (0.5, 0.5, 0.3, 0.9), (0.4, 0.4, 0.4, 0.4)]


@pytest.mark.parametrize("review, block, to_review, to_block", SCALES)
def test_a_score_moved_onto_another_categorys_thresholds_keeps_its_action(review, block, to_review, to_block):
    scores = sorted({0.0, 1.0, review, block, *(i / 200 for i in range(201)),
                     *(x + d for x in (review, block) for d in (-1e-9, 1e-9) if 0 <= x + d <= 1)})  # fmt: skip
    moved = [on_scale_of(s, review, block, to_review, to_block) for s in scores]
    for score, new in zip(scores, moved):
        assert 0.0 <= new <= 1.0
        assert recommend(new, to_review, to_block) == recommend(score, review, block), (score, new)
    assert moved == sorted(moved)  # it never reorders two texts


def test_an_images_text_scores_as_its_strictest_text_category_on_text_toxics_thresholds():
    profile = Profile(mode="enforce", categories={
        "nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8},
        "insult": {"review": 0.2, "block": 0.9}, "profanity": {"enabled": False, "review": 0.1, "block": 0.2},
        "text_toxic": {"review": 0.6, "block": 0.85}})  # fmt: skip
    # insult reviews (0.3 >= 0.2) though toxic allows: the comment would be reviewed, so text_toxic reviews.
    score = strictest_text_score({"toxic": 0.1, "insult": 0.3, "profanity": 0.99}, profile, "text_toxic")
    assert recommend(score, 0.6, 0.85) == "review"
    # A disabled category (profanity) never counts; nothing reached: allow.
    assert recommend(strictest_text_score({"toxic": 0.1, "insult": 0.1, "profanity": 0.99}, profile, "text_toxic"),
                     0.6, 0.85) == "allow"  # fmt: skip
    # A request's threshold judges both scales: toxic 0.45 at ?threshold=0.4 blocks.
    assert strictest_text_score({"toxic": 0.45, "insult": 0.0}, profile, "text_toxic", threshold=0.4) >= 0.4
