"""The threshold backtest (adaptation/backtest.py): weighted (Horvitz-Thompson) estimates of a profile's recall and
benign-flagged share on an account's labels, and the thresholds it suggests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from adaptation.backtest import Backtest, backtest
from adaptation.labels import Label

EMBEDDING = np.zeros(512, dtype=np.float32)


def label(harmful: bool, seen: str = "audit", rate: float = 1.0) -> Label:
    return Label(EMBEDDING, 0.0, harmful, seen, rate, "en", 0.0)


def tiny() -> tuple[np.ndarray, list[Label]]:
    labels = [label(True, "flagged"), label(False, "flagged"), label(True, "audit", 0.1), label(False, "audit", 0.1),
              label(False, "audit", 0.5)]
    return np.array([0.9, 0.7, 0.3, 0.2, 0.6]), labels


def test_the_weighted_estimates_equal_a_hand_computation():
    scores, labels = tiny()
    result = backtest(scores, labels, review=0.5, block=0.8, z=0.0)
    # harmful weight: 1 (0.9) + 10 (0.3) = 11; fine: 1 (0.7) + 10 (0.2) + 2 (0.6) = 13
    assert result.review.recall == pytest.approx(1 / 11)
    assert result.review.benign_flagged == pytest.approx((1 + 2) / 13)
    assert result.block.recall == pytest.approx(1 / 11) and result.block.benign_flagged == 0.0
    assert (result.labels, result.harmful, result.fine) == (5, 2, 3)
    assert result.by_seen == {"flagged": 2, "audit": 3}
    # lowest label score with at most 10% of the fine weight at or above it: 0.6 flags 3/13, 0.7 flags 1/13
    assert result.suggested_thresholds == {"review": 0.7, "block": 0.9}
    assert result.suggested_review.benign_flagged == pytest.approx(1 / 13)


def test_reports_are_ignored_when_audits_exist():
    scores, labels = tiny()
    with_reports = backtest(np.r_[scores, 0.1, 0.05], labels + [label(True, "report"), label(True, "report")],
                            review=0.5, block=0.8)
    alone = backtest(scores, labels, review=0.5, block=0.8)
    assert with_reports.review == alone.review and with_reports.suggested_thresholds == alone.suggested_thresholds
    assert with_reports.by_seen["report"] == 2 and with_reports.labels == 7 and not with_reports.reports_used


def test_reports_stand_in_for_misses_when_there_is_no_audit():
    labels = [label(True, "flagged"), label(False, "flagged"), label(True, "report")]
    result = backtest(np.array([0.9, 0.6, 0.1]), labels, review=0.5, block=0.8)
    assert result.reports_used and result.review.recall == pytest.approx(0.5)


def test_suggested_thresholds_meet_the_target_on_the_labels():
    rng = np.random.default_rng(0)
    n = 2000
    harmful = rng.random(n) < 0.15
    scores = np.clip(rng.normal(np.where(harmful, 0.7, 0.35), 0.15), 0, 1)
    flagged = scores >= 0.5
    audited = ~flagged & (rng.random(n) < 0.1)
    keep = flagged | audited
    labels = [label(bool(h), "flagged" if f else "audit", 1.0 if f else 0.1)
              for h, f in zip(harmful[keep], flagged[keep])]
    scores = scores[keep]
    result = backtest(scores, labels, review=0.5, block=0.9, target_benign_flagged=0.05, z=0.0)
    review, block = result.suggested_thresholds["review"], result.suggested_thresholds["block"]
    weights = np.array([lab.weight for lab in labels])
    fine = ~np.array([lab.harmful for lab in labels])
    share = lambda t: weights[fine & (scores >= t)].sum() / weights[fine].sum()  # noqa: E731
    assert share(review) <= 0.05 and share(block) <= 0.005 and block >= review
    assert review == round(review, 4) and 0.0 <= review <= 1.0
    below = scores[scores < review].max()  # the next lower label score would miss the target
    assert share(below) > 0.05
    assert result.suggested_review.benign_flagged == pytest.approx(share(review))


def test_the_suggestion_with_an_upper_bound_is_never_lower_than_the_point_estimates():
    rng = np.random.default_rng(1)
    harmful = rng.random(300) < 0.2
    scores = np.clip(rng.normal(np.where(harmful, 0.7, 0.35), 0.15), 0, 1)
    labels = [label(bool(h), "audit", 0.1) for h in harmful]
    point = backtest(scores, labels, review=0.5, block=0.9, z=0.0).suggested_thresholds
    bounded = backtest(scores, labels, review=0.5, block=0.9, z=1.0).suggested_thresholds
    assert bounded["review"] > point["review"] and bounded["block"] >= point["block"]


def test_the_curve_covers_one_to_ninety_nine_hundredths_and_never_rises():
    scores, labels = tiny()
    curve = backtest(scores, labels, review=0.5, block=0.8).curve
    assert [p.threshold for p in curve] == [round(0.01 * i, 2) for i in range(1, 100)]
    recalls = [p.recall for p in curve]
    assert recalls == sorted(recalls, reverse=True)


def test_no_labels_no_fine_and_no_harmful_say_why():
    empty = backtest(np.array([]), [], review=0.5, block=0.8)
    assert empty.reason.startswith("No labels") and empty.review is None and empty.curve == []
    no_fine = backtest(np.array([0.9, 0.2]), [label(True), label(True)], review=0.5, block=0.8)
    assert "No fine labels" in no_fine.reason and no_fine.suggested_thresholds is None
    assert no_fine.review.recall == 0.5 and no_fine.review.benign_flagged is None
    no_harmful = backtest(np.array([0.9, 0.2]), [label(False), label(False)], review=0.5, block=0.8)
    assert "No harmful labels" in no_harmful.reason and no_harmful.review.recall is None
    assert no_harmful.suggested_thresholds is not None


def test_the_document_is_json():
    scores, labels = tiny()
    document = backtest(scores, labels, review=0.5, block=0.8).document()
    assert json.loads(json.dumps(document)) == document
    assert document["review"]["threshold"] == 0.5 and len(document["curve"]) == 99
    assert set(document) == set(Backtest.__dataclass_fields__)


def test_scores_and_labels_must_match():
    with pytest.raises(ValueError):
        backtest(np.array([0.1]), [], review=0.5, block=0.8)
