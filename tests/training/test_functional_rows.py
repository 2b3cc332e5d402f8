"""The written functional rows (data/functional/): their labels per category, the train/eval separation, and the shape
of the suite the model card reports (every language, every functionality, each case on its side)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from training.functional_rows import HATEFUL, LANGUAGES, NON_HATEFUL, FunctionalRow, load_functional
from training.text_data import normalise

CATEGORIES = ("toxic", "insult", "threat", "identity_attack", "sexual", "profanity")
HEADER_TRAIN = "language\tfunctionality\tlabel\ttarget\ttext\n"
HEADER_EVAL = "case_id\tlanguage\tfunctionality\tlabel\ttarget\ttext\n"


def _labels(functionality: str, label: int, target: str = "women") -> dict:
    row = FunctionalRow("en", functionality, label, target, "x")
    return dict(zip(CATEGORIES, row.labels(CATEGORIES)))


def test_a_threat_against_a_group_is_a_threat_and_an_identity_attack_but_not_known_as_insult():
    labels = _labels("threat_direct", 1)
    assert labels["toxic"] == 1 and labels["threat"] == 1 and labels["identity_attack"] == 1
    assert math.isnan(labels["insult"]) and math.isnan(labels["sexual"])


def test_benign_profanity_is_profane_and_nothing_else():
    labels = _labels("profanity_nonhate", 0, "none")
    assert labels["profanity"] == 1
    assert [labels[c] for c in ("toxic", "insult", "threat", "identity_attack", "sexual")] == [0.0] * 5


def test_an_insult_of_the_reader_is_an_insult_but_no_identity_attack():
    labels = _labels("insult_individual", 1, "individual")
    assert labels["insult"] == 1 and labels["identity_attack"] == 0 and labels["threat"] == 0


def test_an_eval_case_repeating_a_training_text_is_dropped_from_the_suite(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    (tmp_path / "train" / "en.tsv").write_text(HEADER_TRAIN + "en\tnegated_hate\t0\twomen\tI do not hate women\n")
    (tmp_path / "eval" / "en.tsv").write_text(
        HEADER_EVAL + "en-negated_hate-01\ten\tnegated_hate\t0\twomen\tI  do NOT hate women\n"
        "en-negated_hate-02\ten\tnegated_hate\t0\twomen\tNobody should hurt women\n")
    assert [r.case_id for r in load_functional("eval", tmp_path)] == ["en-negated_hate-02"]
    assert len(load_functional("train", tmp_path)) == 1


@pytest.fixture(scope="module")
def suite():
    return load_functional("eval")


@pytest.fixture(scope="module")
def training():
    return load_functional("train")


def test_the_suite_covers_every_language_and_functionality(suite):
    counts = Counter((c.language, c.functionality) for c in suite)
    assert {c.language for c in suite} == set(LANGUAGES)
    eval_functionalities = {c.functionality for c in suite}
    assert eval_functionalities <= set(HATEFUL) | set(NON_HATEFUL)
    for language in LANGUAGES:
        for functionality in eval_functionalities:
            assert counts[(language, functionality)] >= 8, (language, functionality)


def test_every_case_and_row_is_on_its_functionalitys_side(suite, training):
    for row in suite + training:
        assert row.label == (1 if row.functionality in HATEFUL else 0), row
        assert row.functionality in HATEFUL + NON_HATEFUL and row.language in LANGUAGES and row.text.strip()


def test_case_ids_are_unique_and_no_case_is_a_training_text(suite, training):
    assert len({c.case_id for c in suite}) == len(suite) and all(c.case_id for c in suite)
    trained = {normalise(r.text) for r in training}
    assert not [c.case_id for c in suite if normalise(c.text) in trained]


def test_every_language_has_training_rows_for_every_weakness(training):
    counts = Counter((r.language, r.functionality) for r in training)
    for language in LANGUAGES:
        for functionality in ("negated_hate", "counter_quote", "derog_implicit", "threat_direct", "spell_space",
                              "profanity_nonhate", "abuse_object", "reclaimed"):
            assert counts[(language, functionality)] >= 5, (language, functionality)


def test_the_train_folder_holds_exactly_the_rows_the_shipped_classifier_trained_on():
    import json

    from training.gemma_classifier import HEAD_FILE, WEIGHTS_DIR

    head = json.loads((WEIGHTS_DIR / HEAD_FILE).read_text(encoding="utf-8"))
    assert head["training_rows"]["written"] == len(load_functional("train"))
    assert {r.language for r in load_functional("train")} == set(LANGUAGES)
