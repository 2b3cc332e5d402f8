"""The per-account correction (adaptation/correction.py) on synthetic sites: random unit embeddings, a served logit,
and a site whose moderators also weigh one direction of the embedding that the served score misses."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from adaptation.correction import CONTRADICTED_AUC, MIN_AUDITED_PER_CLASS, Correction, fit_correction, weighted_auc
from adaptation.labels import Label

DIM = 512
REVIEW_LOGIT = 0.0  # the profile's review threshold 0.5, as a logit
PLANTED = np.random.default_rng(42).normal(size=DIM)
PLANTED /= np.linalg.norm(PLANTED)


def traffic(n: int, seed: int, residual: float = 2.0, allowed_only: bool = False):
    """n texts: embeddings, served logits, and the site's labels (whose logit adds `residual` sd along PLANTED;
    `allowed_only`: only among the texts the served score lets through, where the review queue never looks)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM))
    x = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    served = rng.normal(-2.0, 1.5, n)
    shift = residual * math.sqrt(DIM) * (x @ PLANTED)
    if allowed_only:
        shift = np.where(served < REVIEW_LOGIT, shift, 0.0)
    harmful = rng.random(n) < 1.0 / (1.0 + np.exp(-(served + shift)))
    return x, served, harmful


def queue_labels(x, served, harmful, seed: int, audit_rate: float = 0.1, report_rate: float = 0.3,
                 flagged_only: bool = False) -> list[Label]:
    """What the queue shows: every flagged text; allowed ones audited at `audit_rate`; unaudited misses reported."""
    rng = np.random.default_rng(seed)
    labels = []
    for i in range(len(served)):
        if served[i] >= REVIEW_LOGIT:
            labels.append(Label(x[i], float(served[i]), bool(harmful[i]), "flagged", 1.0, "en", float(i)))
        elif flagged_only:
            continue
        elif rng.random() < audit_rate:
            labels.append(Label(x[i], float(served[i]), bool(harmful[i]), "audit", audit_rate, "en", float(i)))
        elif harmful[i] and rng.random() < report_rate:
            labels.append(Label(x[i], float(served[i]), True, "report", 1.0, "en", float(i)))
    return labels


def fresh_aucs(correction: Correction, seed: int, **kwargs) -> tuple[float, float]:
    x, served, harmful = traffic(5000, seed, **kwargs)
    corrected = served + x @ correction.weights + correction.bias
    ones = np.ones(len(served))
    return weighted_auc(harmful, served, ones), weighted_auc(harmful, corrected, ones)


def test_a_correction_fitted_on_audited_labels_with_a_planted_residual_goes_live_and_beats_served_on_fresh_data():
    labels = queue_labels(*traffic(3000, seed=1), seed=1)
    report = fit_correction(labels)
    assert report.active, report.reason
    assert report.corrected_auc - report.served_auc >= 0.01
    served_auc, corrected_auc = fresh_aucs(report.correction, seed=2)
    assert corrected_auc >= served_auc + 0.02


def test_a_correction_fitted_on_flagged_labels_alone_does_not_learn_what_the_queue_never_shows():
    # The site's line differs from the served score only among the texts it allows: the queue's decisions never see
    # those, so a correction fitted on them alone must not go live, and does not beat the served score
    world = dict(residual=2.5, allowed_only=True)
    x, served, harmful = traffic(5000, seed=20, **world)
    alone = fit_correction(queue_labels(x, served, harmful, seed=20, flagged_only=True))
    assert not alone.active, alone.reason
    served_auc, corrected_auc = fresh_aucs(alone.correction, seed=4, **world)
    assert corrected_auc < served_auc + 0.005
    # the same queue with 10% audits of the allowed texts, weighted back by their sampling rate, learns it
    audited = fit_correction(queue_labels(x, served, harmful, seed=20))
    assert audited.active, audited.reason
    served_auc, corrected_auc = fresh_aucs(audited.correction, seed=4, **world)
    assert corrected_auc >= served_auc + 0.02


def test_inverted_labels_never_go_live():
    x, served, harmful = traffic(3000, seed=5, residual=0.0)
    labels = queue_labels(x, served, ~harmful, seed=5)
    report = fit_correction(labels)
    assert not report.active
    assert report.served_auc < CONTRADICTED_AUC and "contradict" in report.reason
    assert report.correction is not None  # still fitted, for the status to show


def test_too_few_audited_labels_stay_off_with_a_reason():
    labels = queue_labels(*traffic(3000, seed=6), seed=6)[:15]
    report = fit_correction(labels)
    assert not report.active
    assert report.reason.startswith("Too few audited labels") and str(MIN_AUDITED_PER_CLASS) in report.reason
    assert report.correction is not None and report.examples == 15


def test_out_of_fold_logits_are_given_for_the_held_out_labels_only():
    labels = queue_labels(*traffic(2000, seed=12), seed=12)
    report = fit_correction(labels)
    held = ~np.isnan(report.out_of_fold)
    assert held.tolist() == [lab.seen != "report" for lab in labels]
    assert "out_of_fold" not in report.document()


def test_no_labels_or_a_single_class_fit_nothing():
    assert fit_correction([]).correction is None and fit_correction([]).reason == "No labels yet."
    x, served, _ = traffic(20, seed=7)
    same = [Label(x[i], float(served[i]), False, "audit", 0.1, None, 0.0) for i in range(20)]
    report = fit_correction(same)
    assert report.correction is None and not report.active and "fine" in report.reason


def test_the_fit_gate_needs_min_gain():
    labels = queue_labels(*traffic(3000, seed=8), seed=8)
    assert not fit_correction(labels, min_gain=0.5).active


def test_a_correction_document_round_trips():
    report = fit_correction(queue_labels(*traffic(1500, seed=9), seed=9))
    correction = report.correction
    again = Correction.from_document(correction.document())
    assert again.version == correction.version and again.bias == correction.bias
    assert np.array_equal(again.weights, correction.weights) and again.weights.dtype == np.float32
    assert report.document()["correction"]["version"] == correction.version


def test_a_document_with_a_wrong_length_or_non_finite_values_is_refused():
    good = Correction.build(np.ones(DIM, dtype=np.float32), 0.5).document()
    with pytest.raises(ValueError):
        Correction.from_document({**good, "dim": DIM + 1})
    with pytest.raises(ValueError):
        Correction.from_document({**good, "bias": float("nan")})
    with pytest.raises(ValueError):
        Correction.from_document(Correction.build(np.full(DIM, np.inf, dtype=np.float32), 0.0).document())
    with pytest.raises(ValueError):
        Correction.from_document({**good, "version": "ad00000000"})
    with pytest.raises(ValueError):
        Correction.from_document({"weights": "not base64!"})


def test_the_version_changes_with_the_weights_and_the_bias():
    weights = np.zeros(DIM, dtype=np.float32)
    base = Correction.build(weights, 0.0)
    nudged = weights.copy()
    nudged[7] = 1e-3
    assert base.version.startswith("ad") and len(base.version) == 10
    assert Correction.build(nudged, 0.0).version != base.version
    assert Correction.build(weights, 1e-6).version != base.version
    assert Correction.build(weights.copy(), 0.0).version == base.version


def test_score_applies_the_correction_to_the_served_probability_quickly():
    rng = np.random.default_rng(10)
    correction = Correction.build(rng.normal(size=DIM).astype(np.float32) * 0.1, -0.3)
    embedding = rng.normal(size=DIM).astype(np.float32)
    expected = 1.0 / (1.0 + math.exp(-(math.log(0.2 / 0.8) + float(correction.weights @ embedding) - 0.3)))
    assert correction.score(0.2, embedding) == pytest.approx(expected, rel=1e-6)
    started = time.perf_counter()
    for _ in range(2000):
        correction.score(0.2, embedding)
    assert (time.perf_counter() - started) / 2000 < 0.5e-3


def test_weighted_auc_weights_each_pair_by_both_labels_weights():
    # harmful 0.9 (w 1) and 0.2 (w 10); fine 0.5 (w 1) and 0.2 (w 1): pairs won 1+1, tied 10*0.5, lost 10
    auc = weighted_auc(np.array([1, 1, 0, 0]), np.array([0.9, 0.2, 0.5, 0.2]), np.array([1.0, 10.0, 1.0, 1.0]))
    assert auc == pytest.approx((1 + 1 + 5) / (11 * 2))
