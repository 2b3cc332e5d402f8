"""Per-language score calibration: the maps are monotone, send a language's own review threshold to the shared one,
leave unmapped categories alone, fall back for languages without dev data, and refuse a file of another model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.text_calibration import FALLBACK, CalibrationMismatch, LanguageCalibration, review_knots
from models.text_toxicity import CALIBRATION_FILE, DEFAULT_WEIGHTS, TextToxicityModel

SHARED = 0.49
MAPS = {"ar": {"toxic": review_knots(0.9, SHARED)}, "da": {"toxic": review_knots(0.3, SHARED)}}


@pytest.mark.parametrize("language", ["ar", "da"])
def test_a_map_is_increasing_and_keeps_the_ends(language):
    calibration = LanguageCalibration(MAPS)
    grid = np.linspace(0, 1, 1001)
    mapped = [calibration.apply(language, {"toxic": x})["toxic"] for x in grid]
    assert all(a < b for a, b in zip(mapped, mapped[1:]))
    assert (mapped[0], mapped[-1]) == (0.0, 1.0)


def test_the_languages_own_threshold_lands_on_the_shared_one():
    calibration = LanguageCalibration(MAPS)
    assert calibration.apply("ar", {"toxic": 0.9})["toxic"] == pytest.approx(SHARED)
    assert calibration.apply("ar", {"toxic": 0.8})["toxic"] < SHARED  # stricter in Arabic: 0.8 no longer reviews
    assert calibration.apply("da", {"toxic": 0.35})["toxic"] > SHARED  # looser in Danish


def test_categories_without_a_map_are_unchanged():
    scores = {"toxic": 0.6, "threat": 0.7, "sexual": 0.01}
    calibrated = LanguageCalibration(MAPS).apply("ar", scores)
    assert calibrated["toxic"] != 0.6 and (calibrated["threat"], calibrated["sexual"]) == (0.7, 0.01)


@pytest.mark.parametrize("language", [None, "fr", "ja"])
def test_a_language_without_a_map_is_uncalibrated_or_gets_the_fallback(language):
    scores = {"toxic": 0.6}
    assert LanguageCalibration(MAPS).apply(language, scores) == scores
    with_fallback = LanguageCalibration({**MAPS, FALLBACK: {"toxic": review_knots(0.7, SHARED)}})
    assert with_fallback.apply(language, scores)["toxic"] == pytest.approx(SHARED * 0.6 / 0.7)
    assert with_fallback.languages == ("ar", "da")


@pytest.mark.parametrize("knots", [[[0.0, 0.0], [0.5, 0.6], [0.4, 0.7], [1.0, 1.0]],  # raw not increasing
                                   [[0.0, 0.0], [0.5, 0.6], [0.7, 0.5], [1.0, 1.0]],  # decreasing
                                   [[0.0, 0.1], [1.0, 1.0]], [[0.0, 0.0], [0.9, 0.9]]])  # ends moved
def test_a_map_that_is_not_monotone_onto_0_1_is_refused(knots):
    with pytest.raises(CalibrationMismatch):
        LanguageCalibration({"en": {"toxic": knots}})


def test_review_knots_at_an_end_is_the_identity():
    assert review_knots(1.0, SHARED) == review_knots(0.0, SHARED) == [[0.0, 0.0], [1.0, 1.0]]


def test_the_block_threshold_stays_in_place_when_both_review_thresholds_lie_below_it():
    calibration = LanguageCalibration({"en": {"toxic": review_knots(0.7, SHARED, 0.84)},
                                       "ar": {"toxic": review_knots(0.9, SHARED, 0.84)}})
    assert calibration.apply("en", {"toxic": 0.84})["toxic"] == pytest.approx(0.84)
    assert calibration.apply("en", {"toxic": 0.7})["toxic"] == pytest.approx(SHARED)
    # Arabic's own review threshold is above the shared block one: no block knot, the map stays increasing
    assert review_knots(0.9, SHARED, 0.84) == [[0.0, 0.0], [0.9, SHARED], [1.0, 1.0]]
    assert calibration.apply("ar", {"toxic": 0.84})["toxic"] < SHARED


def test_a_calibration_file_of_another_model_is_refused_and_a_missing_one_is_no_calibration(tmp_path):
    path = tmp_path / CALIBRATION_FILE
    assert LanguageCalibration.read(path, "v1").languages == ()
    path.write_text(json.dumps({"model_version": "v0", "languages": MAPS}))
    with pytest.raises(CalibrationMismatch, match="v0"):
        LanguageCalibration.read(path, "v1")
    assert LanguageCalibration.read(path, "v0").languages == ("ar", "da")


def test_the_shipped_calibration_belongs_to_the_shipped_model_and_maps_the_default_profile_categories():
    from training.profile_thresholds import FIXED_CATEGORIES

    document = json.loads(DEFAULT_WEIGHTS.with_name(CALIBRATION_FILE).read_text())
    thresholds = json.loads(DEFAULT_WEIGHTS.with_name("thresholds.json").read_text())
    assert document["model_version"] == thresholds["model_version"]
    assert document["shared_review"] == thresholds["default_profile"]["review"]
    # Every default-profile category is mapped but those on at a fixed threshold (threat: not searched, not mapped).
    assert set(thresholds["default_profile"]["categories"]) - set(document["categories"]) == set(FIXED_CATEGORIES)
    for language, maps in document["languages"].items():
        assert set(maps) == set(document["categories"]), language
        for category, knots in maps.items():
            inner = [y for _, y in knots[1:-1]]
            shared = [document["shared_review"][category], document["shared_block"][category]]
            assert inner in ([], shared[:1], shared), (language, category)
    assert FALLBACK in document["languages"]


@pytest.fixture(scope="module")
def model():
    return TextToxicityModel.load()


def test_the_served_model_applies_the_map_of_the_detected_language(model):
    assert "en" in model.calibration.languages
    text = "You are a worthless idiot and everyone hates you."
    [raw] = model.predict_raw([text])
    [served] = model.predict([text])
    assert served == model.calibration.apply("en", raw)
    assert served["threat"] == raw["threat"]  # only the default profile's categories are calibrated
    assert TextToxicityModel.load(calibrated=False).predict([text]) == [raw]
