"""The mapping of this service's categories to OpenAI's and Perspective's (moderation/compat_mapping.py)."""

from __future__ import annotations

import pytest

from moderation.compat_mapping import (
    OPENAI_SOURCES, PERSPECTIVE_ATTRIBUTES, Part, base_attribute, language_code, openai_result, sentence_spans,
)  # fmt: skip
from policy.types import IMAGE_CATEGORIES, TEXT_CATEGORIES, Profile

ALL_ON = {c: {"review": 0.5, "block": 0.8} for c in (*IMAGE_CATEGORIES, *TEXT_CATEGORIES)}


def profile(mode="enforce", **overrides) -> Profile:
    return Profile(name="p", mode=mode, categories={**ALL_ON, **overrides})


def test_openai_has_its_13_categories_and_every_source_is_a_category_of_ours():
    assert len(OPENAI_SOURCES) == 13
    for sources in OPENAI_SOURCES.values():
        for kind, needed in sources:
            assert set(needed) <= set(IMAGE_CATEGORIES if kind == "image" else TEXT_CATEGORIES)


def test_categories_without_a_model_score_0_and_apply_to_no_input():
    result = openai_result([Part("text", {c: 1.0 for c in TEXT_CATEGORIES}, "block")], profile())
    for name in ("self-harm/instructions", "sexual/minors", "illicit", "illicit/violent"):
        assert (result["category_scores"][name], result["categories"][name]) == (0.0, False)
        assert result["category_applied_input_types"][name] == []


@pytest.mark.parametrize(
    ("part", "expected"),
    [(Part("text", {"toxic": 0.9}, "block"), {"harassment"}), (Part("text", {"insult": 0.6}, "review"), {"harassment"}),
     (Part("text", {"identity_attack": 0.6}, "review"), {"hate"}),
     (Part("text", {"identity_attack": 0.6, "threat": 0.6}, "review"),
      {"hate", "hate/threatening", "harassment/threatening", "violence"}),
     (Part("text", {"sexual": 0.9}, "block"), {"sexual"}), (Part("image", {"nsfw": 0.9}, "block"), {"sexual"}),
     (Part("text", {"self_harm": 0.6}, "review"), {"self-harm", "self-harm/intent"}),
     (Part("text", {"violent_speech": 0.6}, "review"), {"violence"}),
     (Part("image", {"violence": 0.9}, "block"), {"violence", "violence/graphic"}),
     (Part("image", {"weapon": 0.9}, "block"), set()), (Part("text", {"profanity": 0.9}, "block"), set())],
)  # fmt: skip
def test_each_category_of_ours_flags_its_openai_categories(part, expected):
    result = openai_result([part], profile())
    assert {name for name, on in result["categories"].items() if on} == expected
    assert result["flagged"] is True  # weapon and profanity still flag, under no OpenAI category


def test_a_score_below_the_review_threshold_or_a_disabled_category_sets_no_boolean():
    assert not any(openai_result([Part("text", {"toxic": 0.4, "insult": 0.9}, "review")],
                                 profile(insult={"enabled": False, "review": 0.5, "block": 0.8}))["categories"].values())


def test_allow_never_sets_a_category_and_several_parts_take_the_highest_score():
    parts = [Part("text", {"toxic": 0.3}, "allow"), Part("text", {"toxic": 0.4}, "allow")]
    result = openai_result(parts, profile())
    assert not result["flagged"] and result["category_scores"]["harassment"] == 0.4


def test_perspective_attributes_map_to_text_categories_and_their_names_to_the_attribute():
    # Perspective has no self-harm or violence attribute: those two reach its clients through none.
    assert set(TEXT_CATEGORIES) - set(PERSPECTIVE_ATTRIBUTES.values()) == {"self_harm", "violent_speech"}
    assert set(PERSPECTIVE_ATTRIBUTES.values()) <= set(TEXT_CATEGORIES)
    names = ["TOXICITY", "TOXICITY@v6", "SEVERE_TOXICITY_EXPERIMENTAL", "toxicity", "THREAT_EXPERIMENTAL@1.2", "SPAM"]
    assert [base_attribute(n) for n in names] == ["TOXICITY", "TOXICITY", "SEVERE_TOXICITY", "TOXICITY", "THREAT", "SPAM"]
    assert [language_code(t) for t in ("en-US", "PT_br", " zh ")] == ["en", "pt", "zh"]


def test_sentence_spans_cover_sentences_and_cut_long_ones():
    text = "Hello there.  You are awful! " + "x" * 25
    spans = sentence_spans(text, 10, max_spans=100)
    assert [text[b:e] for b, e in spans[:2]] == ["Hello there."[:10], "Hello there."[10:]]
    assert all(e - b <= 10 and text[b:e].strip() == text[b:e] for b, e in spans)
    assert sentence_spans("   ", 10, max_spans=100) == []


def test_past_the_cap_consecutive_sentences_are_grouped_into_at_most_that_many_spans():
    text = " ".join(f"Word{n}." for n in range(6_000))  # the span amplification attack: a sentence per word
    spans = sentence_spans(text, 160, max_spans=100)
    assert len(spans) == 100
    assert text[spans[0][0]:spans[0][1]] == " ".join(f"Word{n}." for n in range(60))  # whole sentences, in order
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(end <= next_begin for (_, end), (next_begin, _) in zip(spans, spans[1:]))
    assert sentence_spans("One. Two. Three.", 160, max_spans=3) == [(0, 4), (5, 9), (10, 16)]  # at the cap: as is
