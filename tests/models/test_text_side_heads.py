"""The text model's side heads (models/text_side_heads.py): the file's rules, and how the served model uses them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.text_side_heads import EMBEDDING_SIZE, SIDE_HEADS_FILE, SideHeadMismatch, SideHeads, document
from models.text_toxicity import DEFAULT_WEIGHTS, HEAD_INPUT_SCALE, TextToxicityModel, read_thresholds
from models.universal_sentence_encoder import pad_batch, tokenize

SHIPPED = json.loads(DEFAULT_WEIGHTS.with_name(SIDE_HEADS_FILE).read_text(encoding="utf-8"))


def head(weight: float, bias: float = 0.0, beta: bool = False) -> dict:
    return {"weights": [weight] * EMBEDDING_SIZE, "bias": bias, "beta": beta}


def test_a_head_is_a_logistic_regression_on_the_scaled_embedding():
    heads = SideHeads({"a": head(0.5, -1.0), "b": head(0.0, 2.0, beta=True)}, "base")
    x = np.full((3, EMBEDDING_SIZE), 0.01)
    expected_a = 1 / (1 + np.exp(-(0.5 * 0.01 * EMBEDDING_SIZE - 1.0)))
    np.testing.assert_allclose(heads.scores(x), [[expected_a, 1 / (1 + np.exp(-2.0))]] * 3)
    assert heads.categories == ("a", "b") and heads.beta_categories == ("b",)


def test_a_side_head_of_a_main_head_category_replaces_its_column_in_place(tmp_path):
    weights = tmp_path / DEFAULT_WEIGHTS.name
    weights.symlink_to(DEFAULT_WEIGHTS)
    base = TextToxicityModel.load(str(weights), threads=1, calibrated=False)
    weights.with_name(SIDE_HEADS_FILE).write_text(json.dumps(document({"threat": head(0.0, 3.0)}, base.model_version)))
    replaced = TextToxicityModel.load(str(weights), threads=1, calibrated=False)
    assert replaced.categories == base.categories and "threat" not in replaced.beta_categories
    [scores] = replaced.predict_raw(["hello there"])
    assert scores["threat"] == pytest.approx(1 / (1 + np.exp(-3.0)))
    assert scores["toxic"] == pytest.approx(base.predict_raw(["hello there"])[0]["toxic"], abs=1e-6)


def test_a_file_for_another_encoder_or_of_the_wrong_shape_is_refused(tmp_path):
    path = tmp_path / SIDE_HEADS_FILE
    path.write_text(json.dumps(document({"a": head(0.1)}, "encoder-1")))
    assert SideHeads.read(path, "encoder-1").categories == ("a",)
    with pytest.raises(SideHeadMismatch):
        SideHeads.read(path, "encoder-2")
    with pytest.raises(SideHeadMismatch):
        SideHeads({"a": {"weights": [0.1] * 10, "bias": 0.0}}, "encoder-1")
    assert SideHeads.read(tmp_path / "absent.json", "encoder-1").categories == ()


def test_the_served_version_names_the_heads_so_a_retrained_head_is_a_new_version():
    one, other = SideHeads({"a": head(0.1)}, "base"), SideHeads({"a": head(0.2)}, "base")
    assert one.served_version("base").startswith("base-sh") and one.served_version("base") != other.served_version(
        "base")
    assert SideHeads.none("base").served_version("base") == "base"


@pytest.fixture(scope="module")
def model() -> TextToxicityModel:
    return TextToxicityModel.load(threads=1, calibrated=False)


def test_the_shipped_heads_belong_to_the_shipped_encoder_and_threat_is_gated_by_toxic(model):
    base = TextToxicityModel.load(threads=1, calibrated=False, side_heads=False)
    assert SHIPPED["base_model_version"] == base.model_version
    assert model.model_version == read_thresholds()["model_version"] != base.model_version
    assert model.categories[: len(base.categories)] == base.categories  # threat keeps its column
    assert SHIPPED["categories"]["threat"]["gate"] == "toxic"
    texts = ["I will find you and hurt you.", "Lovely weather for a walk today."]
    with torch.inference_mode():
        embeddings = model._classifier.encoder(*pad_batch(tokenize(model._tokenizer, texts))) * HEAD_INPUT_SCALE
    served, main = model.predict_raw(texts), base.predict_raw(texts)
    heads = SideHeads(SHIPPED["categories"], base.model_version)
    side = heads.scores(embeddings.double().numpy(), {"toxic": np.array([m["toxic"] for m in main])})
    for i in range(len(texts)):
        for j, category in enumerate(heads.categories):
            assert served[i][category] == pytest.approx(side[i, j], abs=1e-6)
        for category in set(base.categories) - {"threat"}:
            assert served[i][category] == pytest.approx(main[i][category], abs=1e-6)  # the main head, unchanged
    with pytest.raises(SideHeadMismatch):
        heads.scores(embeddings.double().numpy())  # a gated head without its gate's scores


# Rule tests (hand-written, not evidence of quality): threats and an incitement to self-harm reach their category's
# review threshold; a news report of violence and short pleasant sentences do not (the ungated threat head sent
# these to review). Talk of medication and a thank-you still reach the beta heads (known false flags, in the model
# card): strict xfail, so the day that stops, the test says.
@pytest.mark.parametrize(("text", "category", "reaches"), [
    ("Kill all of them, they deserve to die.", "violent_speech", True),
    ("I will find you and hurt you.", "threat", True),
    ("Thanks for the recipe, my kids loved it!", "threat", False),
    ("Great game last night, what a goal!", "threat", False),
    ("Police said two people were injured in the attack on Tuesday.", "threat", False),
    ("Nobody would miss you, just go and kill yourself.", "self_harm", True),
    ("Police said two people were injured in the attack on Tuesday.", "violent_speech", False),
    ("I love this song so much", "self_harm", False),
    pytest.param("Take two tablets of the medication every morning with water.", "self_harm", False,
                 marks=pytest.mark.xfail(strict=True, reason="known false flag of the beta self_harm head")),
    pytest.param("Thanks for the recipe, my kids loved it!", "violent_speech", False,
                 marks=pytest.mark.xfail(strict=True, reason="known false flag of the beta violent_speech head")),
])  # fmt: skip
def test_clear_cases_fall_on_their_side_of_the_review_threshold(model, text, category, reaches):
    review = read_thresholds()["categories"][category]["review"]
    assert (model.predict_raw([text])[0][category] >= review) is reaches
