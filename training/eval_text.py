"""Evaluate the served text model on real held-out comments and write its model card: `make eval-text`.

    MODERATION_TEXT_DATA_DIR=/path/to/jsonl-dir .venv/bin/python -m training.eval_text

Every score goes through `TextToxicityModel` on CPU with one thread: the served path (windows, worst window per
category); the per-category tables use the scores before the per-language calibration (`predict_raw`), the default
profile's figures both before and after it (`training/language_figures.py`). The test split (see
training/text_data.py) was never used for training, for choosing the epoch or for the thresholds (those come from
the dev split, `thresholds.json`). Leave-one-source-out figures for every dataset come from `training/loso.py`
(the served encoder frozen, a head refitted without each source: minutes on CPU); the fine-tuned leave-one-source-out
runs and the encoder comparison of the last training run are read from `training-report.json` (they need
retraining). The hand-written served cases (`training/served_cases.py`) are counted as the tests check them. The
hand-written rows of data/text/ are reported apart, as a rule test. Rewrites `models/weights/text/reports/model-card.md`
and the block of docs/text-model.md between the eval-text markers.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import numpy as np

from models.text_toxicity import TextToxicityModel, read_thresholds
from training import language_figures, loso, model_card, served_cases
from training.metrics import review_threshold, roc_auc
from training.reports import MODEL_CARD, REPORTS_DIR
from training.text_data import REPO_ROOT, load_comments, load_handwritten

TEXT_MODEL_DOC = REPO_ROOT / "docs" / "text-model.md"  # holds the block between the eval-text markers
TRAINING_REPORT = REPORTS_DIR / "training-report.json"
FIGURES_KEPT = REPO_ROOT / ".data" / "eval-text-figures.json"  # for --render
TABLE_START, TABLE_END = "<!-- eval-text:start -->", "<!-- eval-text:end -->"
# The quality targets, on real held-out comments.
TARGET_MACRO_AUC, TARGET_LANGUAGE_AUC = 0.85, 0.75
TARGET_REVIEW_RECALL, TARGET_REVIEW_BENIGN_FLAGGED = 0.75, 0.15


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--render", action="store_true",
                        help="rewrite the card and the docs block from the last full run's figures (kept in .data/) "
                             "and the leave-one-source-out report as it stands now (after python -m training.loso)")
    parser.add_argument("--cost", action="store_true",
                        help="with --render: measure the cost figures again (a busy machine inflates them)")
    args = parser.parse_args()
    model = TextToxicityModel.load(threads=1)
    thresholds = read_thresholds()
    assert thresholds["model_version"] == model.model_version, "thresholds.json belongs to another model"
    if args.render:
        figures = json.loads(FIGURES_KEPT.read_text(encoding="utf-8"))
        assert figures["model_version"] == model.model_version, "the kept figures belong to another model"
        figures["loso"] = loso.report(model, load_comments(), thresholds["default_profile"]["review"])
        if args.cost:
            figures["latency"], figures["calibration_cost"] = _latency(model), language_figures.cost(model)
            FIGURES_KEPT.write_text(json.dumps(figures), encoding="utf-8")
    else:
        figures = _measure(model, thresholds)
        FIGURES_KEPT.parent.mkdir(parents=True, exist_ok=True)
        FIGURES_KEPT.write_text(json.dumps(figures), encoding="utf-8")
    report = json.loads(TRAINING_REPORT.read_text(encoding="utf-8"))
    card = model_card.render(model, thresholds, report, figures)
    MODEL_CARD.write_text(card, encoding="utf-8")
    block = model_card.evaluation_block(model, thresholds, figures)
    _replace_block(TEXT_MODEL_DOC, block)
    print(block)
    print(f"\nwrote {MODEL_CARD.relative_to(REPO_ROOT)} and the block of "
          f"{TEXT_MODEL_DOC.relative_to(REPO_ROOT)}")


def _measure(model, thresholds) -> dict:
    test = load_comments(splits=("test",))
    started = time.time()
    # The tables below are of the uncalibrated scores (their per-category thresholds were chosen on those); the
    # default profile's figures are of the served, calibrated ones (training/language_figures.py), before and after.
    scores = model.predict_raw([c.text for c in test])
    seconds = time.time() - started
    served = model.calibrate([c.text for c in test], scores)
    figures = {
        "model_version": model.model_version,
        "languages": _groups(test, scores, thresholds, lambda c: c.lang),
        "sources": _groups(test, scores, thresholds, lambda c: c.dataset),
        "categories": _categories(test, scores, model, thresholds),
        "handwritten": _handwritten(model, thresholds),
        "latency": _latency(model),
        "scoring_seconds": seconds,
        "calibration": language_figures.calibration(test, scores, served, thresholds["default_profile"]["review"]),
        "detector": language_figures.detector(load_comments(splits=("dev",))),
        "calibration_cost": language_figures.cost(model),
        "served_cases": served_cases.evaluate(model, thresholds["categories"]),
        "loso": loso.report(model, load_comments(), thresholds["default_profile"]["review"]),
    }
    figures["targets"] = _targets(figures["languages"])
    figures["targets"]["at_15"] = _recall_at_15(test, scores)
    return figures


def _figures(labels, scores, review, block) -> dict:
    labels, scores = np.asarray(labels, dtype=bool), np.asarray(scores)
    result = {"texts": int(len(labels)), "positives": int(labels.sum()), "auc": roc_auc(labels, scores)}
    for name, threshold in (("review", review), ("block", block)):
        flagged = scores >= threshold
        result[f"{name}_precision"] = float((flagged & labels).sum() / flagged.sum()) if flagged.any() else None
        result[f"{name}_recall"] = float(flagged[labels].mean()) if labels.any() else None
        result[f"{name}_negatives_flagged"] = float(flagged[~labels].mean()) if (~labels).any() else None
    return result


def _groups(test, scores, thresholds, key) -> dict:
    t = thresholds["categories"]["toxic"]
    groups = defaultdict(list)
    for comment, score in zip(test, scores):
        groups[key(comment)].append((comment.label, score["toxic"]))
    result = {name: _figures([l for l, _ in rows], [s for _, s in rows], t["review"], t["block"])
              for name, rows in sorted(groups.items())}
    result["all"] = _figures([c.label for c in test], [s["toxic"] for s in scores], t["review"], t["block"])
    return result


def _categories(test, scores, model, thresholds) -> dict:
    """Per category, over the test rows where it is known; plus the AUC per language where it is labelled."""
    result = {}
    for category in model.categories:
        t = thresholds["categories"][category]
        rows = [(c, s[category]) for c, s in zip(test, scores) if c.known(category) is not None]
        pooled = _figures([c.known(category) for c, _ in rows], [s for _, s in rows], t["review"], t["block"])
        per_language = {}
        for lang in sorted({c.lang for c, _ in rows if c.known(category)}):
            sel = [(c.known(category), s) for c, s in rows if c.lang == lang]
            per_language[lang] = roc_auc([k for k, _ in sel], [s for _, s in sel])
        result[category] = {**pooled, "per_language_auc": per_language, "beta": category in model.beta_categories}
    return result


def _handwritten(model, thresholds) -> dict:
    rows = load_handwritten()
    scores = [s["toxic"] for s in model.predict_raw([r.text for r in rows])]
    t = thresholds["categories"]["toxic"]
    return _figures([r.label for r in rows], scores, t["review"], t["block"])


def _latency(model, repeats: int = 200) -> dict:
    """ms per call of one short text (32 characters) and of one 280-character text, one CPU thread."""
    result = {}
    for name, text in (("short", "Eres un idiota, nadie te quiere."),
                       ("280 chars", ("The council approved the library budget after a long debate. " * 5)[:280])):
        model.predict_raw([text])
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            model.predict_raw([text])
            times.append((time.perf_counter() - started) * 1000)
        result[name] = {"p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95))}
    return result


def _targets(languages: dict) -> dict:
    # languages the served model trained on; the others (fr, it, pl, ru) are out of source: see training/loso.py
    per_language = {k: v["auc"] for k, v in languages.items() if k != "all" and k not in loso.UNSEEN_LANGUAGES}
    macro = float(np.mean(list(per_language.values())))
    pooled = languages["all"]
    return {"macro_auc": macro, "macro_met": macro >= TARGET_MACRO_AUC,
            "below_language_target": {k: v for k, v in per_language.items() if v < TARGET_LANGUAGE_AUC},
            "review_recall": pooled["review_recall"], "review_benign_flagged": pooled["review_negatives_flagged"],
            "review_met": pooled["review_recall"] >= TARGET_REVIEW_RECALL
            and pooled["review_negatives_flagged"] <= TARGET_REVIEW_BENIGN_FLAGGED}


def _recall_at_15(test, scores) -> dict:
    """The target's own operating point: a toxic threshold that flags 15% of the benign *dev* comments, on test."""
    dev = load_comments(splits=("dev",))
    dev_scores = np.array([s["toxic"] for s in TextToxicityModel.load(threads=1).predict_raw([c.text for c in dev])])
    threshold = review_threshold(dev_scores[[c.label == 0 for c in dev]], TARGET_REVIEW_BENIGN_FLAGGED)
    test_scores, labels = np.array([s["toxic"] for s in scores]), np.array([c.label == 1 for c in test])
    langs = np.array([c.lang for c in test])
    per_language = {lang: (float((test_scores[labels & (langs == lang)] >= threshold).mean()),
                           float((test_scores[~labels & (langs == lang)] >= threshold).mean()))
                    for lang in sorted(set(langs))}
    recall, flagged = float((test_scores[labels] >= threshold).mean()), float((test_scores[~labels] >= threshold).mean())
    return {"threshold": threshold, "recall": recall, "benign_flagged": flagged, "per_language": per_language,
            "met": recall >= TARGET_REVIEW_RECALL and flagged <= TARGET_REVIEW_BENIGN_FLAGGED}


def _replace_block(path, block: str) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    path.write_text(text[:start] + "\n" + block + "\n" + text[end:], encoding="utf-8")


if __name__ == "__main__":
    main()
