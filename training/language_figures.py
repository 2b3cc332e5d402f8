"""Figures of the language-aware path for `make eval-text`: the detector's accuracy on short real comments, and the
default profile's review operating point per language before and after the per-language calibration."""

from __future__ import annotations

import time

import numpy as np

from models import language_id
from training.metrics import roc_auc
from training.profile_thresholds import FIXED_CATEGORIES, PROFILE_CATEGORIES, figures

SHORT_CHARS = 80  # a "short comment" for the detector's accuracy: most comments a site moderates are this short
TARGET_BENIGN_FLAGGED, TARGET_RECALL = 0.10, 0.75  # per language with dev data; pooled


def detector(comments) -> dict:
    """Per language the data names: share of its short comments detected as that language, and the cost."""
    short = [c for c in comments if len(c.text) <= SHORT_CHARS]
    started = time.perf_counter()
    found = [language_id.language_of(c.text) for c in short]
    ms = 1000 * (time.perf_counter() - started) / max(1, len(short))
    result = {"ms_per_text": ms, "max_chars": SHORT_CHARS, "languages": {}}
    for lang in sorted({c.lang for c in short}):
        hits = [f == c.lang for c, f in zip(short, found) if c.lang == lang]
        result["languages"][lang] = {"texts": len(hits), "accuracy": float(np.mean(hits))}
    result["macro_accuracy"] = float(np.mean([v["accuracy"] for v in result["languages"].values()]))
    return result


def calibration(comments, raw: list[dict], served: list[dict], review: dict[str, float]) -> dict:
    """The default profile's review recall and benign flag rate, and toxic ROC AUC, per language: uncalibrated
    scores and served (calibrated) ones, at the profile's shared review thresholds."""
    result = {}
    for name, predictions in (("uncalibrated", raw), ("calibrated", served)):
        columns = {c: np.array([p[c] for p in predictions]) for c in PROFILE_CATEGORIES + FIXED_CATEGORIES}
        result[name] = {**figures(comments, columns, review), **_aucs(comments, columns["toxic"])}
    after = result["calibrated"]
    result["over_target"] = {lang: v["benign_flagged"] for lang, v in after["languages"].items()
                             if v["benign_flagged"] > TARGET_BENIGN_FLAGGED}  # fmt: skip
    result["met"] = not result["over_target"] and after["recall"] >= TARGET_RECALL
    return result


def _aucs(comments, toxic: np.ndarray) -> dict:
    langs, labels = np.array([c.lang for c in comments]), np.array([c.label for c in comments])
    per = {lang: roc_auc(labels[langs == lang], toxic[langs == lang]) for lang in sorted(set(langs))}
    return {"auc": per, "macro_auc": float(np.mean(list(per.values()))), "pooled_auc": roc_auc(labels, toxic)}


def cost(model, text: str = "Eres un idiota, nadie te quiere.", repeats: int = 300) -> dict:
    """ms p50 of one short text, served (detection + calibration) and uncalibrated, one CPU thread."""
    result = {}
    for name, call in (("served", model.predict), ("uncalibrated", model.predict_raw)):
        call([text])
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            call([text])
            times.append((time.perf_counter() - started) * 1000)
        result[name] = float(np.percentile(times, 50))
    return result
