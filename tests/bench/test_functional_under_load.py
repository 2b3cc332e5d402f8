"""The record of the functional suite under load (bench/experiments/functional_under_load.py): which cases it sends,
how it sends them, what it reads back, and how a point's answers become its figures."""

from __future__ import annotations

import json

import pytest

from bench.experiments.functional_under_load import (ATTRIBUTES, CUT, SCORED_RECORD, Case, Point, body_of, in_order,
                                                     language_figures, point_figures, suite, toxicity_of)


def _case(language, label, n, functionality="derog_explicit"):
    return Case(f"{language}-{functionality}-{n:02d}", language, functionality, label, f"case {language} {label} {n}")


def test_the_suite_is_the_cases_the_in_process_figure_scored(tmp_path):
    header = "case_id\tlanguage\tfunctionality\tlabel\ttarget\ttext\n"
    (tmp_path / "en.tsv").write_text(header + "en-a-01\ten\ta\t1\twomen\tOne.\nen-a-02\ten\ta\t0\tnone\tTwo.\n")
    (tmp_path / "pl.tsv").write_text(header + "pl-a-01\tpl\ta\t1\twomen\tTrzy.\n")
    record = tmp_path / "report.json"
    record.write_text(json.dumps({"finetuned": {"functional_scores": [{"case_id": "en-a-02"}, {"case_id": "pl-a-01"}]}}))
    assert [c.case_id for c in suite(tmp_path, record)] == ["en-a-02", "pl-a-01"]
    assert suite(tmp_path, tmp_path / "none.json")[0] == Case("en-a-01", "en", "a", 1, "One.")  # no record: all


def test_the_shipped_suite_is_the_scored_one():
    cases = suite()
    scored = json.loads(SCORED_RECORD.read_text())["finetuned"]["functional_scores"]
    assert sorted(c.case_id for c in cases) == sorted(entry["case_id"] for entry in scored)
    assert len({c.language for c in cases}) == 11


def test_a_case_is_sent_as_coral_sends_a_comment_in_its_own_language():
    assert body_of(_case("pl", 1, 1)) == {"comment": {"text": "case pl 1 1"}, "requestedAttributes": ATTRIBUTES,
                                          "languages": ["pl"], "doNotStore": True}
    assert set(ATTRIBUTES) == {"TOXICITY", "SEVERE_TOXICITY"}


def test_toxicity_is_read_from_the_summary_score_and_nothing_else_counts_as_an_answer():
    assert toxicity_of({"attributeScores": {"TOXICITY": {"summaryScore": {"value": 0.42}}}}) == 0.42
    assert toxicity_of({"error": {"code": 429}}) is None
    assert toxicity_of({"attributeScores": {"TOXICITY": {"summaryScore": {"value": "high"}}}}) is None
    assert toxicity_of(None) is None


def test_the_order_is_fixed_and_keeps_every_case():
    cases = [_case("en", n % 2, n) for n in range(50)]
    assert in_order(cases) == in_order(list(cases)) and sorted(in_order(cases), key=cases.index) == cases
    assert in_order(cases) != cases


def test_figures_count_as_the_in_process_evaluation_does():
    import numpy as np

    from training.eval_gemma_classifier import functional_figures

    rng = np.random.default_rng(5)
    cases = [_case(lang, int(rng.random() < 0.6), n) for n, lang in enumerate(["en", "hi"] * 30)]
    toxicity = [float(round(x, 2)) for x in rng.random(len(cases))]
    ours = language_figures(cases, toxicity)
    theirs = functional_figures(np.array([c.label for c in cases]), np.array([c.language for c in cases]),
                                np.array([c.functionality for c in cases]), np.array(toxicity))
    for language in ("en", "hi"):
        for key in ("accuracy", "hateful_caught", "non_hateful_passed", "auc"):
            assert ours[language][key] == pytest.approx(theirs[language][key], abs=1e-4), (language, key)


def test_a_points_figures_cut_toxicity_at_half_and_share_the_routes():
    cases = [_case("en", 1, 1), _case("en", 1, 2), _case("en", 0, 3), _case("en", 0, 4)]
    point = Point(16, cases, [0.9, CUT - 0.01, 0.1, CUT], failures=1, seconds=2.0, latencies=[0.1, 0.2, 0.3, 0.4],
                  routes={"second_stage": 3.0, "skipped_deadline": 1.0})
    figures = point_figures(point)
    assert figures["languages"]["en"] == {"accuracy": 0.5, "hateful_caught": 0.5, "non_hateful_passed": 0.5,
                                          "auc": 0.75}
    assert figures["routes"] == {"second_stage": 0.75, "skipped_deadline": 0.25}
    assert (figures["answered"], figures["failures"], figures["texts_per_s"], figures["macro_auc"]) == (4, 1, 2.0, 0.75)
