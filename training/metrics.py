"""Binary classification metrics used to choose and report the text head (numpy only, no scikit-learn)."""

from __future__ import annotations

import numpy as np


def roc_auc(labels, scores) -> float:
    """Probability that a random positive outranks a random negative (ties count half)."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average rank over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    tie_rank = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(tie_rank, counts)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def threshold_for_false_positive_rate(labels, scores, max_rate: float) -> float:
    """Lowest threshold that flags at most `max_rate` of the benign texts (labels == 0).

    Unlike precision, this does not depend on how many toxic texts a set happens to hold.
    """
    labels, scores = np.asarray(labels), np.asarray(scores)
    benign = np.sort(scores[labels == 0])
    for threshold in np.unique(scores):
        if np.mean(benign >= threshold) <= max_rate:
            return float(threshold)
    return 1.0


def review_threshold(negative_scores, max_rate: float) -> float:
    """Lowest threshold that flags at most `max_rate` of the negatives (vectorised)."""
    negatives = np.sort(np.asarray(negative_scores, dtype=np.float64))
    if len(negatives) == 0:
        return 1.0
    allowed = int(np.floor(max_rate * len(negatives)))  # negatives that may reach the threshold
    if allowed >= len(negatives):
        return float(negatives[0])
    # just above the (allowed+1)-th highest negative
    return float(np.nextafter(negatives[len(negatives) - allowed - 1], np.inf))


def block_threshold(labels, scores, target: float, min_flagged: int = 10) -> tuple[float, float]:
    """(threshold, precision): the lowest threshold whose precision reaches `target` with at least `min_flagged`
    texts above it; where no threshold reaches it, the one of highest precision (so the caller can say so)."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="mergesort")
    hits = np.cumsum(labels[order])
    flagged = np.arange(1, len(scores) + 1)
    precision = hits / flagged
    # only positions at the last copy of a score are valid cut points (ties are flagged together)
    valid = np.r_[scores[order][1:] != scores[order][:-1], True] & (flagged >= min_flagged)
    if not valid.any():
        return 1.0, float("nan")
    reaching = np.where(valid & (precision >= target))[0]
    best = reaching[-1] if len(reaching) else np.where(valid)[0][np.argmax(precision[valid])]
    return float(scores[order][best]), float(precision[best])


def average_precision(labels, scores) -> float:
    """Area under the precision-recall curve as a step function (scikit-learn's definition; ties flagged together)."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if not labels.any():
        return float("nan")
    order = np.argsort(-scores, kind="mergesort")
    hits, flagged = np.cumsum(labels[order]), np.arange(1, len(scores) + 1)
    last = np.r_[scores[order][1:] != scores[order][:-1], True]  # cut points: the last copy of each score
    precision, recall = hits[last] / flagged[last], hits[last] / labels.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))
