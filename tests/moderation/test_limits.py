"""The checks a request passes before any unit is taken: scope, text and batch limits, the threshold override."""

from __future__ import annotations

import pytest

from moderation.errors import InvalidBatch, InvalidThreshold, ScopeNotCovered, TextTooLong
from moderation.limits import BATCH_TEXT_LIMITS, MAX_BATCH_ITEMS, check_texts, parse_threshold, require_scope
from policy.types import Plan


def plan(scope: str = "both", text_max_chars: int = 5) -> Plan:
    return Plan(name="plan", scope=scope, monthly_quota=10, rate_per_second=10, burst=10, text_max_chars=text_max_chars)


@pytest.mark.parametrize(("raw", "expected"), [(None, None), ("0", 0.0), ("0.35", 0.35), ("1", 1.0)])
def test_threshold_accepts_numbers_from_0_to_1(raw, expected):
    assert parse_threshold(raw) == expected


@pytest.mark.parametrize("raw", ["-0.1", "1.01", "nan", "NaN", "inf", "abc", ""])
def test_threshold_refuses_anything_else(raw):
    with pytest.raises(InvalidThreshold):
        parse_threshold(raw)


def test_a_plan_covers_only_its_scope():
    require_scope(plan(scope="text"), "text")
    with pytest.raises(ScopeNotCovered, match="image"):
        require_scope(plan(scope="text"), "image")


def test_check_texts_holds_the_batch_limits():
    check_texts(["x" * 5] * BATCH_TEXT_LIMITS, plan())
    for texts, error in (([], InvalidBatch), (["x"] * (MAX_BATCH_ITEMS + 1), InvalidBatch), (["x" * 6], TextTooLong),
                         (["x" * 5] * (BATCH_TEXT_LIMITS + 1), TextTooLong)):  # fmt: skip
        with pytest.raises(error):
            check_texts(texts, plan())


def test_every_text_too_long_says_it_in_one_pattern():
    messages = []
    for texts in (["x" * 6], ["ok", "x" * 6]):
        with pytest.raises(TextTooLong) as refused:
            check_texts(texts, plan())
        messages.append(refused.value.message)
    assert messages == ["The text is above the plan's limit of 5 characters.",
                        "Text 1 is above the plan's limit of 5 characters."]  # fmt: skip
