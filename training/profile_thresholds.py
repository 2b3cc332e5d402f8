"""Review thresholds for a whole profile, chosen jointly on the real dev split: `make train-text` runs it.

The per-category thresholds in thresholds.json each flag at most 10% of benign dev comments on their own; a
profile that enables several categories flags the union, which is more. Here the review thresholds of the
default profile's text categories are chosen together (with FIXED_CATEGORIES' flags counted in the union), on
uncalibrated scores: the highest recall of toxic dev
comments whose union flags at most `MAX_BENIGN_FLAGGED` of the benign ones (`training/language_calibration.py`
then maps each language's scores so that these thresholds act as that language's own). Block thresholds stay per
category (95% precision). The result is written to thresholds.json under `default_profile`, with the same figures
on the held-out test split, overall and per language; config/profiles.yaml copies the thresholds (a test checks).

    MODERATION_TEXT_DATA_DIR=/path/to/jsonl-dir .venv/bin/python -m training.profile_thresholds
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from models.text_toxicity import DEFAULT_WEIGHTS, THRESHOLDS_FILE, TextToxicityModel, read_thresholds
from training.metrics import review_threshold
from training.text_data import load_comments

PROFILE_CATEGORIES = ("toxic", "insult", "identity_attack")  # their review thresholds are searched together
# Also on in the default profile, at their own review threshold (thresholds.json): they count in the union the
# search bounds, and are not searched: threat, whose side head's review threshold flags at most 2% of benign dev
# comments (training/side_heads.py).
FIXED_CATEGORIES: tuple[str, ...] = ("threat",)
MAX_BENIGN_FLAGGED = 0.15  # the operating point: at most 15% of benign comments sent to review
RATES = (0.01, 0.02, 0.03, 0.05, 0.07, 0.08, 0.09, 0.10, 0.11, 0.12, 0.13, 0.14, 0.15)


def flagged(scores: dict[str, np.ndarray], review: dict[str, float]) -> np.ndarray:
    return np.any([scores[c] >= review[c] for c in review], axis=0)


def choose(scores: dict[str, np.ndarray], labels: np.ndarray, bound: float = MAX_BENIGN_FLAGGED,
           floors: dict[str, float] | None = None, fixed: dict[str, float] | None = None) -> dict[str, float]:
    """The review thresholds of PROFILE_CATEGORIES (one benign-flag rate per category, none below its floor) with
    the best dev recall under the bound, where the union also counts the `fixed` thresholds' flags."""
    benign, floors, fixed = labels == 0, floors or {}, fixed or {}
    best, best_recall, fewest = None, -1.0, None
    for rates in itertools.product(RATES, repeat=len(PROFILE_CATEGORIES)):
        review = {c: max(review_threshold(scores[c][benign], r), floors.get(c, 0.0))
                  for c, r in zip(PROFILE_CATEGORIES, rates)}
        hit = flagged(scores, {**review, **fixed})
        if hit[benign].mean() <= bound and hit[~benign].mean() > best_recall:
            best, best_recall = review, hit[~benign].mean()
        if fewest is None or hit[benign].mean() < fewest[0]:
            fewest = (hit[benign].mean(), review)
    # No combination within the bound (the fixed categories' flags alone may exceed it): the one that flags fewest.
    return {c: round(t, 4) for c, t in (best or fewest[1]).items()}


def figures(comments, scores, review) -> dict:
    labels = np.array([c.label for c in comments])
    hit = flagged(scores, review)
    result = {"recall": round(float(hit[labels == 1].mean()), 3), "benign_flagged": round(float(hit[labels == 0].mean()), 3)}
    langs = np.array([c.lang for c in comments])
    result["languages"] = {
        lang: {"recall": round(float(hit[(langs == lang) & (labels == 1)].mean()), 3),
               "benign_flagged": round(float(hit[(langs == lang) & (labels == 0)].mean()), 3)}
        for lang in sorted(set(langs))
    }
    return result


def scored(model, comments) -> dict[str, np.ndarray]:
    predictions = model.predict([c.text for c in comments])
    return {c: np.array([p[c] for p in predictions]) for c in PROFILE_CATEGORIES + FIXED_CATEGORIES}


def fixed_review(thresholds: dict) -> dict[str, float]:
    return {c: thresholds["categories"][c]["review"] for c in FIXED_CATEGORIES}


def main() -> None:
    model = TextToxicityModel.load(threads=1, calibrated=False)
    thresholds = read_thresholds()
    assert thresholds["model_version"] == model.model_version, "thresholds.json belongs to another model"
    dev, test = load_comments(splits=("dev",)), load_comments(splits=("test",))
    dev_scores, test_scores = scored(model, dev), scored(model, test)
    fixed = fixed_review(thresholds)
    review = {**choose(dev_scores, np.array([c.label for c in dev]), fixed=fixed), **fixed}
    thresholds["default_profile"] = {
        "categories": list(PROFILE_CATEGORIES + FIXED_CATEGORIES),
        "max_benign_flagged": MAX_BENIGN_FLAGGED,
        "review": review,
        "dev": figures(dev, dev_scores, review),
        "test": figures(test, test_scores, review),
    }
    THRESHOLDS_FILE.write_text(json.dumps(thresholds, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(thresholds["default_profile"], indent=1))
    print(f"wrote {THRESHOLDS_FILE.relative_to(DEFAULT_WEIGHTS.parent.parent.parent.parent)}")


if __name__ == "__main__":
    main()
