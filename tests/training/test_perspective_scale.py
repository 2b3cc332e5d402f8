"""The fit of Perspective's scale (training/perspective_scale.py): the fitting functions recover known maps from
small synthetic data (the embedding map and its CV too), the figures mean what the report says, the training side
and the served module apply a map alike (with and without evidence), and, with the real data, the shipped file and
figures are of it and the shipped TOXICITY reaches 0.8 on held-out toxic text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models.log_odds import logit
from moderation.compat_mapping import PERSPECTIVE_ATTRIBUTES
from moderation.perspective_scale import CATEGORIES, EMBEDDING_SIZE, PerspectiveScale
from training import perspective_scale as ps
from training.metrics import roc_auc
from training.text_data import DATA_DIR_ENV, data_dir


def votes(rng: np.random.Generator, probability: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rater fractions as the data has them: 4 to 14 raters a post, each voting with `probability`."""
    raters = rng.integers(4, 15, len(probability))
    return rng.binomial(raters, probability) / raters, raters


def test_platt_recovers_a_known_map_from_rater_fractions():
    rng = np.random.default_rng(0)
    score = rng.uniform(0.01, 0.99, 6000)
    fraction, raters = votes(rng, ps.sigmoid(0.4 * logit(score) - 1.5))
    a, b = ps.fit_platt(score, fraction)
    assert (a, b) == pytest.approx((0.4, -1.5), abs=0.06)
    a_weighted, b_weighted = ps.fit_platt(score, fraction, raters)  # the same map: raters drawn independently here
    assert (a_weighted, b_weighted) == pytest.approx((0.4, -1.5), abs=0.06)


def test_the_composition_recovers_known_coefs_and_keeps_them_non_negative():
    rng = np.random.default_rng(1)
    X = rng.normal(0, 2, (8000, 3))
    fraction, _ = votes(rng, ps.sigmoid(X @ [0.8, 0.0, 0.4] - 2.0))
    coef, bias = ps.fit_logistic(X, fraction)
    assert list(coef) == pytest.approx([0.8, 0.0, 0.4], abs=0.06) and bias == pytest.approx(-2.0, abs=0.1)
    # A truly negative coef: held at 0 by the constrained fit, recovered by the free one.
    fraction, _ = votes(rng, ps.sigmoid(X @ [0.8, -0.6, 0.4] - 2.0))
    constrained, _ = ps.fit_logistic(X, fraction)
    free, _ = ps.fit_logistic(X, fraction, nonnegative=False)
    assert constrained[1] == 0.0 and (constrained >= 0).all()
    assert free[1] == pytest.approx(-0.6, abs=0.06)


def _loss(X, target, coef, bias):
    z = X @ coef + bias
    return float(np.mean(np.logaddexp(0, z) - target * z))


def test_the_constrained_fit_is_the_best_non_negative_one():
    rng = np.random.default_rng(2)
    X = rng.normal(0, 1.5, (3000, 4))
    fraction, _ = votes(rng, ps.sigmoid(X @ [0.5, -0.4, 0.0, 0.9] - 1.0))
    coef, bias = ps.fit_logistic(X, fraction, ridge=0.0)
    best = _loss(X, fraction, coef, bias)
    for _ in range(200):  # no non-negative point nearby does better
        other = np.maximum(coef + rng.normal(0, 0.05, 4), 0.0)
        assert _loss(X, fraction, other, bias + rng.normal(0, 0.05)) >= best - 1e-9


def test_isotonic_pools_adjacent_violators():
    assert list(ps.isotonic([1, 2, 3, 4], [1.0, 3.0, 2.0, 4.0])) == [1.0, 2.5, 2.5, 4.0]
    assert list(ps.isotonic([4, 3, 2, 1], [1.0, 3.0, 2.0, 4.0])) == [2.5, 2.5, 2.5, 2.5]  # x's order counts
    assert list(ps.isotonic([1, 2], [2.0, 1.0], [3.0, 1.0])) == [1.75, 1.75]  # weighted mean


def test_the_knots_follow_a_known_monotone_map():
    rng = np.random.default_rng(3)
    score = rng.uniform(0.001, 0.999, 20000)
    truth = np.clip(0.05 + 0.1 * np.maximum(logit(score), 0), 0, 0.9)  # flat, then rising: not a sigmoid
    fraction, _ = votes(rng, truth)
    xs, ys = ps.fit_knots(score, fraction, knots=8)
    assert len(xs) == 8 and all(b > a for a, b in zip(xs, xs[1:])) and all(b >= a for a, b in zip(ys, ys[1:]))
    expected = np.clip(0.05 + 0.1 * np.maximum(xs, 0), 0, 0.9)
    assert np.abs(np.array(ys) - expected).max() < 0.06  # a group's mean of a convex stretch sits a little above


def test_ece_on_known_cases():
    assert ps.ece([0.05, 0.15], [0.05, 0.35]) == pytest.approx(0.1)  # two bins, one off by 0.2
    assert ps.ece([0.05, 0.06], [0.0, 0.11]) == pytest.approx(0.0)  # one bin: its means agree
    assert ps.ece([1.0, 1.0], [1.0, 0.0]) == pytest.approx(0.5)  # 1.0 falls in the last bin
    assert ps.ece([0.05, 0.15], [0.05, 0.35], [1, 3]) == pytest.approx(0.15)  # weights: the bin's share
    rng = np.random.default_rng(4)
    p = rng.uniform(0, 1, 50000)
    assert ps.ece(p, rng.binomial(50, p) / 50) < 0.01  # calibrated
    assert ps.ece(np.clip(p + 0.2, 0, 1), p) > 0.15  # shifted


def test_weighted_auc_is_roc_auc_for_labels_and_counts_votes():
    rng = np.random.default_rng(5)
    labels, scores = rng.random(300) < 0.3, rng.random(300).round(2)  # with ties
    assert ps.weighted_auc(scores, labels, ~labels) == pytest.approx(roc_auc(labels, scores))
    # One post with 1 severe vote of 4 at 0.9, one with none at 0.1: 1 vote pair won outright, 3 tied within the
    # first post's own votes (half), 4 against the second post's.
    assert ps.weighted_auc([0.9, 0.1], [1, 0], [3, 4]) == pytest.approx((1 * 3 * 0.5 + 1 * 4) / (1 * 7))


def test_at_cuts_counts_recall_and_benign_flagged():
    figures = ps.at_cuts([0.95, 0.82, 0.6, 0.85, 0.3], [True, True, True, False, False], cuts=(0.5, 0.85))
    assert figures["0.5"] == {"recall": 1.0, "benign_flagged": 0.5}
    assert figures["0.85"] == {"recall": pytest.approx(1 / 3, abs=1e-4), "benign_flagged": 0.5}
    assert figures["rows"] == {"positive": 3, "benign": 2}


def test_the_training_side_applies_a_map_as_the_served_module_does():
    scale, document = PerspectiveScale.shipped(), json.loads(ps.SERVED_FILE.read_text(encoding="utf-8"))
    rng = np.random.default_rng(6)
    columns = {name: 1 / (1 + np.exp(-rng.normal(0, 5, 300))) for name in CATEGORIES}
    embedding = rng.normal(0, 1, (300, EMBEDDING_SIZE)).astype(np.float16)
    has = rng.random(300) < 0.9
    for attribute, entry in document["attributes"].items():
        vectorised = ps.apply_map(entry, columns, embedding, has)
        one_by_one = [scale.score(attribute, {n: float(v[i]) for n, v in columns.items()},
                                  embedding[i] if has[i] else None, scale.encoder) for i in range(300)]
        assert np.allclose(vectorised, one_by_one, rtol=1e-9, atol=1e-12), attribute
        without = ps.apply_map(entry, columns)  # no evidence: the fallback, as the module without an embedding
        assert np.allclose(without, [scale.score(attribute, {n: float(v[i]) for n, v in columns.items()})
                                     for i in range(300)], rtol=1e-9, atol=1e-12), attribute
    first = document["attributes"]["TOXICITY"]["first_stage"]  # an answer the second stage did not give
    assert np.allclose(ps.apply_map(first, columns, embedding, has),
                       [scale.score("TOXICITY", {"toxic": float(columns["toxic"][i])},
                                    embedding[i] if has[i] else None, scale.encoder, first_stage=True)
                        for i in range(300)], rtol=1e-9, atol=1e-12)
    knots = {"inputs": ["toxic"], "kind": "knots", "x": [-2.0, 0.0, 3.0], "y": [0.1, 0.2, 0.7]}
    fake = PerspectiveScale({**document, "attributes": {**document["attributes"], "TOXICITY": knots}})
    assert np.allclose(ps.apply_map(knots, columns), [fake.score("TOXICITY", {"toxic": float(v)})
                                                      for v in columns["toxic"]])


def _synthetic_embedding_rows(rng, n, signal: float):
    """Rows whose fraction depends on logit(toxic) and, by `signal`, on one direction of a unit-size embedding."""
    toxic = rng.uniform(0.01, 0.99, n)
    embedding = rng.normal(0, 1, (n, EMBEDDING_SIZE)).astype(np.float16)
    direction = np.zeros(EMBEDDING_SIZE)
    direction[:4] = [signal, -signal, signal / 2, 0.0]
    truth = ps.sigmoid(0.5 * logit(toxic) - 1.0 + embedding.astype(np.float64) @ direction)
    fraction, _ = votes(rng, truth)
    return {"toxic": toxic}, embedding, fraction, direction


def test_the_embedding_map_recovers_a_known_map_and_its_fallback_is_fitted_on_the_same_rows():
    rng = np.random.default_rng(11)
    columns, embedding, fraction, direction = _synthetic_embedding_rows(rng, 6000, 1.0)
    entry, info = ps.fit_embedding_map(("toxic",), columns, embedding, fraction, l2=1e-4)
    assert entry["kind"] == "embedding_logistic" and len(entry["weights"]) == EMBEDDING_SIZE
    assert entry["coef"][0] == pytest.approx(0.5, abs=0.08) and entry["bias"] == pytest.approx(-1.0, abs=0.12)
    assert np.array(entry["weights"][:4]) == pytest.approx(direction[:4], abs=0.12)
    assert np.abs(entry["weights"][4:]).max() < 0.15  # noise dimensions near 0
    assert info == {"rows": 6000, "weight": 6000.0, "l2": 1e-4}
    # The fallback: the inputs alone, fitted on these rows (its coef is flatter: the embedding's part is noise to it).
    coef, bias = ps.fit_logistic(logit(columns["toxic"])[:, None], fraction, ridge=ps.CATEGORY_RIDGE)
    assert entry["fallback"] == {"inputs": ["toxic"], "kind": "logistic", "coef": [round(float(coef[0]), 6)],
                                 "bias": round(bias, 6)}
    scale = PerspectiveScale({"model_version": "v", "encoder": "e", "attributes": {
        **{a: {"inputs": [c], "kind": "identity"} for a, c in PERSPECTIVE_ATTRIBUTES.items()},
        "SEVERE_TOXICITY": {"inputs": ["toxic"], "kind": "identity"}, "TOXICITY": entry}})  # the module takes it
    assert scale.uses_embedding("TOXICITY")


def test_the_cv_takes_a_large_l2_for_a_noise_embedding_and_a_small_one_for_a_signal():
    rng = np.random.default_rng(12)
    for signal, expected in ((0.0, max(ps.L2_GRID)), (1.5, None)):
        columns, embedding, fraction, _ = _synthetic_embedding_rows(rng, 3000, signal)
        _, info = ps.fit_embedding_map(("toxic",), columns, embedding, fraction)
        assert set(info["cv_log_loss"]) == {f"{v:g}" for v in ps.L2_GRID}
        assert info["l2"] == min(ps.L2_GRID, key=lambda v: info["cv_log_loss"][f"{v:g}"])
        if expected is not None:
            assert info["l2"] == expected
        else:
            assert info["l2"] < max(ps.L2_GRID)


def test_the_category_coefs_stay_non_negative_and_the_embedding_weights_free():
    rng = np.random.default_rng(13)
    toxic = rng.uniform(0.01, 0.99, 4000)
    embedding = rng.normal(0, 1, (4000, EMBEDDING_SIZE)).astype(np.float16)
    truth = ps.sigmoid(-0.6 * logit(toxic) - 0.8 * embedding[:, 0].astype(np.float64))  # toxic lowers it here
    fraction, _ = votes(rng, truth)
    entry, _ = ps.fit_embedding_map(("toxic",), {"toxic": toxic}, embedding, fraction, l2=1e-3)
    assert entry["coef"] == [0.0] and entry["fallback"]["coef"] == [0.0]
    assert entry["weights"][0] < -0.5  # free to go negative (a little flatter than -0.8: toxic's part is held at 0)


def test_the_single_input_attributes_match_the_compat_mapping():
    assert ps.SINGLE_INPUT == PERSPECTIVE_ATTRIBUTES


REAL_DATA = pytest.mark.skipif(data_dir() is None or not (data_dir() / ps.FRACTIONS_FILE).is_file(),
                               reason=f"{DATA_DIR_ENV} is unset or has no {ps.FRACTIONS_FILE}: the rater fractions "
                                      "live outside the repository")


def _kept_data():
    """The real rows and their kept scores; skips when none are kept for this data and model."""
    try:
        return ps.load_data(data_dir(), ps.cascade_version(), refit_only=True)[0]
    except SystemExit as exc:
        pytest.skip(f"no kept scores of this data and model ({exc}): run `make perspective-scale` first")


@REAL_DATA
def test_the_shipped_file_and_report_are_of_this_data_and_model():
    rows = ps.load_fractions(data_dir())
    document = json.loads(ps.SERVED_FILE.read_text(encoding="utf-8"))
    report = json.loads(ps.REPORT.read_text(encoding="utf-8"))
    splits = [r["orig_split"] for r in rows]
    assert document["data"]["rows"] == len(rows) == report["rows"]["fractions"]
    assert document["data"]["fitted_on"]["rows"] == splits.count("train") == report["rows"]["train"]
    assert document["data"]["held_out"]["rows"] == splits.count("dev") == report["rows"]["dev"]
    assert document["model_version"] == report["model_version"] == ps.cascade_version()
    assert document["encoder"] == report["encoder"] and ps.cascade_version().startswith(document["encoder"])
    assert report["rows"]["corpus_train"] == len(ps.load_train_corpus(data_dir(),
                                                                       report["rows"].get("corpus_per_dataset")))
    assert report["served_file"] == document


def _approx(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            _approx(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _approx(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, abs=2e-4), path
    else:
        assert a == b, path


def _without_cv(fits: dict) -> dict:
    return {name: {k: v for k, v in info.items() if k != "cv_log_loss"} for name, info in fits.items()}


@REAL_DATA
def test_a_sample_scored_now_matches_the_kept_scores_and_a_refit_gives_the_shipped_figures():
    """The shipped figures hold: a fixed sample of rows scored through the served path now gives the scores and
    evidence the fit used, and a refit from them (at the L2 the CV chose) gives the shipped file and every figure
    of the report."""
    data = _kept_data()
    sample = list(range(0, len(data.rows), 97))[:200]
    now = ps.score_served([data.rows[i]["text"] for i in sample])
    for key in ("cascade_toxic", *(f"usem3_{c}" for c in ps.SEVERE_INPUTS)):
        assert np.allclose(now[key], data.fractions.scores[key][sample], atol=1e-5), key
    kept = data.fractions.scores["embedding"][sample].astype(np.float32)
    assert np.abs(now["embedding"].astype(np.float32) - kept).max() <= 2e-3  # float16 of the same window's output
    assert str(now["encoder"]) == str(data.fractions.scores["encoder"])
    shipped = json.loads(ps.REPORT.read_text(encoding="utf-8"))
    document, report = ps.fit_and_measure(data, ps.cascade_version(), str(data.fractions.scores["encoder"]),
                                          ps.shipped_l2(shipped))
    assert document == json.loads(ps.SERVED_FILE.read_text(encoding="utf-8"))
    for part in ("targets", "candidates", "cascade", "usem3_only", "rows"):
        _approx(report[part], shipped[part], part)
    for part in ("toxicity_fit", "severe_fit"):
        _approx({**report[part], "fits": _without_cv(report[part]["fits"])},
                {**shipped[part], "fits": _without_cv(shipped[part]["fits"])}, part)


@REAL_DATA
def test_the_shipped_toxicity_reaches_0_8_on_held_out_toxic_text_through_the_served_module():
    """Perspective's clients cut at 0.8: some held-out toxic text (label 1 of the test split, or a dev post most
    raters called toxic) must reach it with its own evidence, scored one by one as a request is."""
    data = _kept_data()
    scale = PerspectiveScale.shipped()
    encoder = str(data.heldout.scores["encoder"])
    assert encoder == scale.encoder
    found = []
    for scored, toxic in ((data.heldout, np.array([r["split"] == "test" and r["label"] == 1
                                                   for r in data.heldout_rows])),
                          (data.fractions, data.dev & (data.fraction["toxicity"] >= 0.5))):
        columns = scored.columns()
        vectorised = scored.apply(json.loads(ps.SERVED_FILE.read_text(encoding="utf-8"))["attributes"]["TOXICITY"])
        for i in np.flatnonzero(toxic)[np.argsort(-vectorised[toxic])][:20]:  # the highest; checked one by one
            value = scale.score("TOXICITY", {n: float(v[i]) for n, v in columns.items()},
                                scored.embedding()[i], encoder)
            assert value == pytest.approx(vectorised[i], abs=1e-9)
            found.append(value)
    assert max(found) >= 0.8


def test_the_docs_page_carries_the_shipped_figures():
    report = json.loads(ps.REPORT.read_text(encoding="utf-8"))
    page = (ps.REPO_ROOT / "docs" / "perspective-scale.md").read_text(encoding="utf-8")
    dev = report["cascade"]["toxicity_dev"]
    severe = report["cascade"]["severe_dev"]["roc_auc_any_severe_vote"]
    for figure in (dev["ece"]["before"], dev["ece"]["after"], dev["roc_auc"]["before"], dev["roc_auc"]["after"],
                   severe["SEVERE_TOXICITY"], severe["TOXICITY"]):
        assert f"{figure:.3f}" in page
    at = dev["cuts"]["after"]["0.8"]
    assert f"{100 * at['benign_flagged']:.2f}%" in page and f"{100 * at['recall']:.1f}%" in page
    assert report["toxicity_fit"]["chosen"] == "with_corpus" and "(b) `with_corpus`** (served)" in page
    assert report["served_file"]["encoder"] in page
