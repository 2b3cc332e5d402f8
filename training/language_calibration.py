"""Fit the per-language calibration of the text model on the real dev split: `make train-text` runs it.

For each language with enough dev comments, the review thresholds of the default profile's categories (toxic,
insult, identity_attack) are chosen jointly on that language's dev comments, on uncalibrated scores, as the
combination with the highest recall of toxic comments whose union flags at most `MAX_BENIGN_FLAGGED` of the
language's benign comments; each category then gets the monotone map (`models.text_calibration.review_knots`) that
sends the language's threshold to the profile's shared one and keeps the shared block threshold in place. A
language is the one the data names; in service it is the one the detector finds (`models.language_id`), so the
figures written with the maps are taken through the detector. A text whose detected language has no map of its own
gets the FALLBACK map, fitted the same way on all languages' dev comments together.

Writes `models/weights/text/calibration.json`: the model version, the maps, and the default profile's recall and
benign flag rate per language on dev and test, before and after calibration.

    MODERATION_TEXT_DATA_DIR=/path/to/jsonl-dir .venv/bin/python -m training.language_calibration
"""

from __future__ import annotations

import json

import numpy as np

from models.text_calibration import FALLBACK, LanguageCalibration, review_knots
from models.text_toxicity import CALIBRATION_FILE, DEFAULT_WEIGHTS, TextToxicityModel, read_thresholds
from training.profile_thresholds import FIXED_CATEGORIES, PROFILE_CATEGORIES, choose, figures
from training.text_data import load_comments

MAX_BENIGN_FLAGGED = 0.10  # per language with dev data: at most 10% of its benign comments sent to review
# A language needs this many benign and toxic dev comments for its own thresholds; fewer would fit noise.
MIN_DEV_BENIGN, MIN_DEV_TOXIC = 50, 20
# Below this many benign dev comments a language's thresholds may rise above the shared ones but never fall below:
# lowering them to gain recall flagged 16% of Danish benign test comments after 7% on dev (about 100 of each).
MIN_DEV_BENIGN_TO_LOWER = 300
CALIBRATION_PATH = DEFAULT_WEIGHTS.with_name(CALIBRATION_FILE)


def fit(comments, raw: list[dict[str, float]], shared_review: dict[str, float], margin: float = 1.0,
        languages: list[str | None] | None = None, shared_block: dict[str, float] | None = None) -> dict:
    """{language: {category: knots}} for every language with enough dev comments, and for FALLBACK (all of them).
    `languages`: each comment's language as served (detected); by default the one the data names."""
    langs = np.array([lang or FALLBACK for lang in languages] if languages else [c.lang for c in comments])
    labels = np.array([c.label for c in comments])
    maps = {}
    for language in [*sorted(set(langs) - {FALLBACK}), FALLBACK]:
        rows = langs == language if language != FALLBACK else np.ones(len(langs), dtype=bool)
        benign = int((labels[rows] == 0).sum())
        if benign < MIN_DEV_BENIGN or (labels[rows] == 1).sum() < MIN_DEV_TOXIC:
            continue
        scores = {c: np.array([s[c] for s, keep in zip(raw, rows) if keep])
                  for c in PROFILE_CATEGORIES + FIXED_CATEGORIES if c in shared_review}
        chosen = [c for c, keep in zip(comments, rows) if keep]
        # Categories on at a fixed threshold (threat) are not mapped, but their flags count in the language's union.
        fixed = {c: shared_review[c] for c in FIXED_CATEGORIES if c in shared_review}
        own = choose(scores, labels[rows], bound(benign, margin), floors(chosen, benign, shared_review), fixed)
        maps[language] = {c: review_knots(own[c], shared_review[c], (shared_block or {}).get(c))
                          for c in PROFILE_CATEGORIES}  # fmt: skip
    return maps


def floors(comments, benign: int, shared_review: dict[str, float]) -> dict[str, float]:
    """Per category, how low the language's own threshold may go: not below the shared one when the language has
    too few benign dev comments, nor for a fine category its dev data does not label (a Turkish text would be sent
    to review as an `insult` on the strength of an insult head never checked in Turkish)."""
    floor = {}
    for category in PROFILE_CATEGORIES:
        labelled = sum(c.known(category) is True for c in comments) >= MIN_DEV_TOXIC
        if benign < MIN_DEV_BENIGN_TO_LOWER or not labelled:
            floor[category] = shared_review[category]
    return floor


def bound(benign: int, margin: float) -> float:
    """The dev flag rate to aim at: MAX_BENIGN_FLAGGED less `margin` standard errors of that rate on `benign`
    comments, so that a language with few dev comments is not fitted to the edge (Danish has about 100)."""
    return MAX_BENIGN_FLAGGED - margin * (MAX_BENIGN_FLAGGED * (1 - MAX_BENIGN_FLAGGED) / benign) ** 0.5


def calibrated(model: TextToxicityModel, comments, raw) -> list[dict[str, float]]:
    return model.calibrate([c.text for c in comments], raw)


def columns(predictions: list[dict[str, float]]) -> dict[str, np.ndarray]:
    return {c: np.array([p[c] for p in predictions]) for c in PROFILE_CATEGORIES + FIXED_CATEGORIES}


def main() -> None:
    model = TextToxicityModel.load(threads=1, calibrated=False)
    thresholds = read_thresholds()
    assert thresholds["model_version"] == model.model_version, "thresholds.json belongs to another model"
    shared = thresholds["default_profile"]["review"]
    splits = {name: load_comments(splits=(name,)) for name in ("dev", "test")}
    raw = {name: model.predict_raw([c.text for c in comments]) for name, comments in splits.items()}
    block = {c: thresholds["categories"][c]["block"] for c in PROFILE_CATEGORIES}
    maps = fit(splits["dev"], raw["dev"], shared, shared_block=block)
    model.calibration = LanguageCalibration(maps)
    document = {"model_version": model.model_version, "max_benign_flagged": MAX_BENIGN_FLAGGED,
                "categories": list(PROFILE_CATEGORIES), "shared_review": shared, "shared_block": block,
                "languages": maps}
    for name, comments in splits.items():
        document[name] = {
            "uncalibrated": figures(comments, columns(raw[name]), shared),
            "calibrated": figures(comments, columns(calibrated(model, comments, raw[name])), shared),
        }
    CALIBRATION_PATH.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({name: document[name] for name in splits}, indent=1))
    print(f"wrote {CALIBRATION_PATH}")


if __name__ == "__main__":
    main()
