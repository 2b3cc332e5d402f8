"""Probe: cheaper per-account corrections than the embedding residual, and stricter gates (an experiment kept as a
record, not a target).

`python -m training.experiments.site_features_probe [--seeds N]` (MODERATION_TEXT_DATA_DIR set). Sites: the datasets
the served text model never trained on (`training.loso.SERVED_TRAINING_EXCLUDES`), all their splits (none was
trained on), those with at least MIN_PER_CLASS rows of each class. Every comment is scored once by the **served**
model (`TextToxicityModel.predict_with_evidence`: calibrated scores of every served category and the worst toxic
window's embedding), cached under .data/site_features/. Then training/label_walk.py's replay, as
training/eval_site.py's: per site and seed, shuffle, first half = history, second half = future; walk the history: a
row the default profile sends to review (any of its enabled text categories at or above its review threshold,
config/profiles.yaml: what the service does) is a `flagged` label (rate 1), an allowed row is audited with
probability AUDIT_RATE (rate 0.1), an allowed toxic row not audited is reported with probability REPORT_RATE (rate
1); stop at N labels (a site counts only for the N it reaches).
Each correction is fitted on the labels; the future half's ROC AUC of the toxic score, corrected against served.

Corrections, all `corrected logit = served toxic logit + w . x + b`, weighted logistic regression with the served
logit as offset, label weights 1/rate normalised to mean 1, b free:
- `emb`: adaptation/correction.py's `fit_correction` as it is (x = the worst window's embedding, L2 300 on the
  globally scaled embedding); `emb L` the same at L2 L (this file's solver, checked equal to correction.py's);
- `cat-std L` / `cat-raw L`: x = the logits of the served model's other category scores (every served category but
  toxic: insult, threat, identity_attack, sexual, profanity, violent_speech, self_harm; clipped to [1e-4, 1 - 1e-4]),
  each standardised (weighted, on the labels) / only centred (they are all logits already); L2 L in units of one
  average-weighted label, as in correction.py;
- `cat-std+emb L`: both blocks, each its own penalty (L on the standardised category logits, 300 on the embedding).
Gates, on correction.py's check (5-fold cross-validated weighted AUC of the flagged and audit labels, pooled out of
fold, its folds; off below its CONTRADICTED_AUC): `cv10` = correction.py's (at least 10 audited labels of each class,
CV gain >= 0.01); `cv20` = at least 20 of each; `boot` = gain - 0.5 SE >= 0.01, SE of the paired gain by a
class-stratified weighted bootstrap (BOOTSTRAP resamples of the out-of-fold labels); `hm` = the same with
Hanley-McNeil's SE of the corrected AUC (Kish effective counts; ignores the pairing, so stricter); `boot20` = `boot`
and 20 of each; `cv0` = CV gain > 0; `dev` = out-of-fold weighted deviance below that of the served logit plus a
fold-fitted bias (the ranking part of the correction, not its recalibration).

Its results (2026-11-29, 5 seeds, the sites above): docs/site-adaptation.md, "Experiments kept as records"; the full
grid in .data/site_features/probe-report.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np

from adaptation import correction
from adaptation.correction import L2 as EMBEDDING_L2
from adaptation.correction import _folds, fit_correction, weighted_auc
from adaptation.labels import Label
from models.log_odds import logit
from training import loso
from training.label_walk import AUDIT_RATE, REPORT_RATE, halves, replay, walk, walk_rng
from training.metrics import roc_auc
from training.text_data import REPO_ROOT

SIZES = (50, 100, 200)
SEEDS = 5
MIN_PER_CLASS = 50
CLIP = 1e-4
CATEGORY_L2 = (1.0, 3.0, 10.0, 30.0, 100.0)  # the category block alone
JOINT_L2 = (10.0, 30.0, 100.0)  # the category block's beside the embedding's EMBEDDING_L2
OTHER_EMBEDDING_L2 = (100.0, 1000.0, 3000.0)  # the embedding alone at other L2s than the served one
MIN_GAIN, FOLDS, BOOTSTRAP = 0.01, 5, 200
GATES = ("cv10", "cv20", "boot", "hm", "boot20", "cv0", "logloss", "dev")
CACHE_DIR = loso.CACHE_DIR.parent / "site_features"
REPORT = CACHE_DIR / "probe-report.json"
_NEWTON_STEPS, _TOLERANCE = 30, 1e-6


def main() -> None:
    import torch

    from models.text_toxicity import TextToxicityModel
    from training.text_data import load_comments

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--emb-l2", type=float, nargs="*", default=list(OTHER_EMBEDDING_L2))
    parser.add_argument("--category-l2", type=float, nargs="*", default=list(CATEGORY_L2))
    parser.add_argument("--scalings", nargs="*", default=["std", "raw"], help="of the category block alone")
    parser.add_argument("--joint-l2", type=float, nargs="*", default=list(JOINT_L2))
    parser.add_argument("--no-reports", action="store_true", help="also each variant fitted without the reports")
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.time()
    model = TextToxicityModel.load(threads=1)
    data = served_scores(model, load_comments())
    print(f"served scores of {len(data['label'])} rows in {time.time() - started:.0f} s")
    check_solver(data)
    variants = [("emb", None)] + [(f"emb {l2:g}", {"emb": (l2, "global")}) for l2 in args.emb_l2]
    variants += [(f"cat-{s} {l2:g}", {"cat": (l2, s)}) for s in args.scalings for l2 in args.category_l2]
    variants += [(f"cat-std+emb {l2:g}", {"cat": (l2, "std"), "emb": (EMBEDDING_L2, "global")})
                 for l2 in args.joint_l2]
    if args.no_reports:  # the same fitted on the flagged and audit labels only
        variants += [(f"{name} norep", (spec or {"emb": (EMBEDDING_L2, "global")}) | {"_no_reports": True})
                     for name, spec in variants]
    result = simulate(data, variants, seeds=args.seeds, sizes=args.sizes)
    if not args.no_ceiling:
        result["ceiling"] = ceiling(data, variants, seeds=args.seeds)
    result["seconds"] = round(time.time() - started)
    result["model_version"] = model.model_version
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print_tables(result)
    print(f"wrote {args.report} in {result['seconds']} s")


def review_thresholds() -> dict[str, float]:
    """The default profile's review threshold of each enabled text category (config/profiles.yaml; the image
    categories are the three the image models score)."""
    import yaml

    config = yaml.safe_load((REPO_ROOT / "config" / "profiles.yaml").read_text())
    categories = config["default"]["categories"]
    return {name: limits["review"] for name, limits in categories.items()
            if name not in ("nsfw", "weapon", "violence") and limits.get("enabled", True)}


def served_scores(model, comments) -> dict[str, np.ndarray]:
    """Every comment of the sites, scored by the served model: its calibrated scores (rows x model.categories), the
    embedding of its worst toxic window (float16, as a label keeps it), its dataset, language and label; cached."""
    rows = [c for c in comments if c.dataset in loso.SERVED_TRAINING_EXCLUDES]
    digest = hashlib.sha256()
    for c in rows:
        digest.update(f"{c.source}\x00{c.label}\x00{c.text}\x00".encode("utf-8"))
    path = CACHE_DIR / f"served-{model.model_version}-{digest.hexdigest()[:16]}.npz"
    if path.exists():
        return dict(np.load(path, allow_pickle=False))
    scores = np.zeros((len(rows), len(model.categories)))
    embedding = np.zeros((len(rows), 512), dtype=np.float16)
    for start in range(0, len(rows), 1000):
        chunk = rows[start:start + 1000]
        for i, (calibrated, _, evidence) in enumerate(model.predict_with_evidence([c.text for c in chunk])):
            scores[start + i] = [calibrated[k] for k in model.categories]
            if evidence is not None:
                embedding[start + i] = evidence.embedding
    data = {"dataset": np.array([c.dataset for c in rows]), "lang": np.array([c.lang for c in rows]),
            "label": np.array([c.label for c in rows], dtype=np.int8), "scores": scores,
            "categories": np.array(model.categories), "embedding": embedding}
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.savez(path, **data)
    return data


def prepared(data: dict) -> dict:
    """The arrays the simulation reads: served toxic logit (as adaptation.labels.logit), the category logits, the
    embedding (float32), the default profile's flags."""
    categories = [str(c) for c in data["categories"]]
    scores = data["scores"]
    review = review_thresholds()
    flagged = np.zeros(len(scores), dtype=bool)
    for category, threshold in review.items():
        flagged |= scores[:, categories.index(category)] >= threshold
    others = [i for i, c in enumerate(categories) if c != "toxic"]
    return {"dataset": data["dataset"], "lang": data["lang"], "label": data["label"].astype(bool),
            "offset": logit(scores[:, categories.index("toxic")].astype(np.float64)),
            "cat": logit(scores[:, others].astype(np.float64), CLIP), "cat_names": [categories[i] for i in others],
            "emb": data["embedding"].astype(np.float32), "flagged": flagged, "review": review}


def sites(p: dict) -> dict[str, np.ndarray]:
    out = {}
    for dataset in sorted(set(p["dataset"].tolist())):
        rows = np.where(p["dataset"] == dataset)[0]
        if min(p["label"][rows].sum(), (~p["label"][rows]).sum()) >= MIN_PER_CLASS:
            out[dataset] = rows
    return out


# ---------------------------------------------------------------------------------------------------------- fitting

def fit_blocks(blocks: dict[str, np.ndarray], spec: dict, offset, y, weight) -> tuple[dict[str, np.ndarray], float]:
    """Weighted logistic regression with the offset; per block of features (name -> (l2, scaling)) its own scaling,
    fitted on these rows (`std`: each feature by its weighted SD; `raw`: centred only; `global`: centred, divided by
    one RMS over the block, as correction.py scales the embedding) and its own L2. Returns the weights on the raw
    features per block and the bias."""
    v = weight / weight.mean()
    columns, penalties, means, scales = [], [], {}, {}
    for name, (l2, scaling) in _blocks(spec).items():
        x = blocks[name].astype(np.float64)
        mean = (v[:, None] * x).sum(axis=0) / v.sum()
        z = x - mean
        if scaling == "std":
            scale = np.sqrt((v[:, None] * z * z).sum(axis=0) / v.sum())
            scale[scale < 1e-9] = 1.0
        elif scaling == "global":
            scale = np.full(x.shape[1], float(np.sqrt(np.mean(z * z))) or 1.0)
        else:
            scale = np.ones(x.shape[1])
        columns.append(z / scale)
        penalties.append(np.full(x.shape[1], l2))
        means[name], scales[name] = mean, scale
    theta = correction.newton_with_offset(np.hstack(columns), offset, y, v, np.concatenate(penalties))
    weights, bias, start = {}, float(theta[-1]), 0
    for name in _blocks(spec):
        d = len(means[name])
        weights[name] = theta[start:start + d] / scales[name]
        bias -= float(means[name] @ weights[name])
        start += d
    return weights, bias


def _blocks(spec: dict) -> dict:
    """The feature blocks of a variant's spec (its other keys, `_`-prefixed, are options)."""
    return {k: v for k, v in spec.items() if not k.startswith("_")}


def apply(blocks: dict[str, np.ndarray], rows, offset: np.ndarray, fitted) -> np.ndarray:
    weights, bias = fitted
    return offset + sum(blocks[name][rows].astype(np.float64) @ w for name, w in weights.items()) + bias


def check_solver(data: dict) -> None:
    """fit_blocks with the embedding alone, L2 300, global scale, must be fit_correction's fit."""
    p = prepared(data)
    rows = np.where(p["dataset"] == next(iter(sites(p))))[0][:150]
    labels = [Label(p["emb"][i], float(p["offset"][i]), bool(p["label"][i]), "audit", 1.0, None, 0.0) for i in rows]
    fit = fit_correction(labels)
    mine = fit_blocks({"emb": p["emb"][rows]}, {"emb": (EMBEDDING_L2, "global")}, p["offset"][rows],
                      p["label"][rows].astype(float), np.ones(len(rows)))
    gap = np.abs(mine[0]["emb"] - fit.correction.weights).max()
    assert gap < 1e-4 and abs(mine[1] - fit.correction.bias) < 1e-3, (gap, mine[1], fit.correction.bias)


# ------------------------------------------------------------------------------------------------------------ gates

def gates(y: np.ndarray, offset: np.ndarray, out_of_fold: np.ndarray | None, weight: np.ndarray,
          audited: np.ndarray, rng: np.random.Generator, recalibrated: np.ndarray | None = None) -> dict[str, bool]:
    """Whether each gate lets the correction live, from the out-of-fold corrected logits of the audited labels."""
    harmful, fine = int((y[audited] == 1).sum()), int((y[audited] == 0).sum())
    contradicted = getattr(correction, "CONTRADICTED_AUC", 0.5)  # fit_correction's own (0.35 since 2026-11-29)
    if out_of_fold is None or min(harmful, fine) < 10 or weighted_auc(y[audited], offset[audited],
                                                                      weight[audited]) < contradicted:
        return dict.fromkeys(GATES, False)
    scored = audited & ~np.isnan(out_of_fold)
    ys, base, corrected, w = y[scored].astype(bool), offset[scored], out_of_fold[scored], weight[scored]
    shifted = recalibrated[scored] if recalibrated is not None else base
    gain = weighted_auc(ys, corrected, w) - weighted_auc(ys, base, w)
    positives, negatives = np.where(ys)[0], np.where(~ys)[0]
    gains = []
    for _ in range(BOOTSTRAP):
        pick = np.r_[rng.choice(positives, len(positives)), rng.choice(negatives, len(negatives))]
        gains.append(weighted_auc(ys[pick], corrected[pick], w[pick]) - weighted_auc(ys[pick], base[pick], w[pick]))
    boot_se = float(np.std(gains))
    hm_se = _hanley_mcneil(weighted_auc(ys, corrected, w), _kish(w[ys]), _kish(w[~ys]))
    enough20 = min(harmful, fine) >= 20
    deviance = lambda z: float(np.sum(w * (np.logaddexp(0.0, z) - ys * z)))  # noqa: E731
    return {"cv10": gain >= MIN_GAIN, "cv20": enough20 and gain >= MIN_GAIN,
            "boot": gain - 0.5 * boot_se >= MIN_GAIN, "hm": gain - 0.5 * hm_se >= MIN_GAIN,
            "boot20": enough20 and gain - 0.5 * boot_se >= MIN_GAIN, "cv0": gain > 0,
            "logloss": deviance(corrected) < deviance(base), "dev": deviance(corrected) < deviance(shifted),
            "cv_gain": gain}


def recalibrated_out_of_fold(offset, y, weight, audited, seed: int) -> np.ndarray:
    """The served logit plus a bias fitted on the training folds (the same folds): what the correction's own b
    gives without w, so that a deviance check measures the ranking part alone."""
    oof = np.full(len(y), np.nan)
    for held in _folds(y, audited, FOLDS, seed):
        train = np.ones(len(y), dtype=bool)
        train[held] = False
        theta = correction.newton_with_offset(np.zeros((int(train.sum()), 0)), offset[train], y[train],
                        weight[train] / weight[train].mean(), np.zeros(0))
        oof[held] = offset[held] + theta[-1]
    return oof


def _kish(w: np.ndarray) -> float:
    return float(w.sum() ** 2 / (w * w).sum())


def _hanley_mcneil(auc: float, n1: float, n0: float) -> float:
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    return math.sqrt(max(auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n0 - 1) * (q2 - auc * auc), 0.0) / (n1 * n0))


def out_of_fold(blocks, spec, offset, y, weight, audited, seed: int) -> np.ndarray:
    """correction.py's check: its folds, every label but the held-out audited ones in training."""
    oof = np.full(len(y), np.nan)
    for held in _folds(y, audited, FOLDS, seed):
        train = np.ones(len(y), dtype=bool)
        train[held] = False
        fitted = fit_blocks({k: b[train] for k, b in blocks.items()}, spec, offset[train], y[train], weight[train])
        oof[held] = apply(blocks, held, offset[held], fitted)
    return oof


# ------------------------------------------------------------------------------------------------------- simulation

def walked(p: dict, history: np.ndarray, n: int, seed: int):
    """training/label_walk.py's walk, flagged by the default profile's decision: label rows, how seen, sampling
    rates."""
    labels = walk(p["flagged"], p["label"], history, n, walk_rng(seed))
    return np.array(labels.rows, dtype=np.int64), np.array(labels.seen), np.array(labels.rates)


def site_run(p: dict, variants, history, future, n: int, seed: int) -> dict | None:
    rows, seen, rate = walked(p, history, n, seed)
    if len(rows) < n:
        return None
    y, offset, weight = p["label"][rows].astype(float), p["offset"][rows], 1.0 / rate
    audited = seen != "report"
    future_y, future_offset = p["label"][future], p["offset"][future]
    base = roc_auc(future_y, future_offset)
    run = {"base": base, "flagged": int((seen == "flagged").sum()), "audit": int((seen == "audit").sum()),
           "audited_harmful": int(y[audited].sum()), "audited_fine": int((1 - y[audited]).sum()), "variants": {}}
    gate_rng = np.random.default_rng(2000 + seed)
    recalibrated = recalibrated_out_of_fold(offset, y, weight, audited, seed) if y.min() < y.max() else None
    for name, spec in variants:
        if y.min() == y.max():
            run["variants"][name] = {"corrected": base} | dict.fromkeys(GATES, False)
            continue
        if spec is None:  # the current correction, as the service fits it
            labels = [Label(p["emb"][i], float(p["offset"][i]), bool(p["label"][i]), s, r, None, 0.0)
                      for i, s, r in zip(rows, seen, rate)]
            fit = fit_correction(labels, seed=seed)
            corrected = future_offset + p["emb"][future].astype(np.float64) @ fit.correction.weights.astype(
                np.float64) + fit.correction.bias
            oof = fit.out_of_fold
        else:
            keep = audited if spec.get("_no_reports") else np.ones(len(rows), dtype=bool)
            blocks = {k: p[k][rows[keep]] for k in _blocks(spec)}
            fitted = fit_blocks(blocks, spec, offset[keep], y[keep], weight[keep])
            corrected = apply({k: p[k] for k in _blocks(spec)}, future, future_offset, fitted)
            harmful, fine = int(y[audited].sum()), int((1 - y[audited]).sum())
            oof = np.full(len(rows), np.nan)
            if min(harmful, fine) >= 10:
                oof[keep] = out_of_fold(blocks, spec, offset[keep], y[keep], weight[keep], audited[keep], seed)
            else:
                oof = None
        live = gates(y, offset, oof, weight, audited, gate_rng, recalibrated)
        if spec is None:
            assert live["cv10"] == fit.active, (fit.reason, live)
        run["variants"][name] = {"corrected": roc_auc(future_y, corrected)} | live
    return run


def simulate(p_or_data: dict, variants, *, seeds: int, sizes) -> dict:
    p = p_or_data if "offset" in p_or_data else prepared(p_or_data)
    def after_site(dataset, rows, seconds):
        print(f"  {dataset}: {len(rows)} rows, flagged {p['flagged'][rows].mean():.2f}, {seconds:.0f} s", flush=True)

    runs = replay(sites(p), seeds, sizes,
                  lambda history, future, n, seed: site_run(p, variants, history, future, n, seed), after_site)
    return {"seeds": seeds, "audit_rate": AUDIT_RATE, "report_rate": REPORT_RATE, "review": p["review"],
            "categories": p["cat_names"], "variants": [name for name, _ in variants],
            "sites": {d: {"rows": len(r), "toxic": int(p["label"][r].sum()),
                          "served_auc": roc_auc(p["label"][r], p["offset"][r]),
                          "flagged": float(p["flagged"][r].mean())} for d, r in sites(p).items()},
            "sizes": {str(n): summary(runs[n], [name for name, _ in variants]) for n in sizes}}


def summary(runs: dict[str, list[dict]], names: list[str]) -> dict:
    """Per variant: per site the mean over seeds of the future AUC gain ungated and under each gate (the base where
    the gate keeps the correction off), and the share of runs live; macro = the mean over sites."""
    out = {"sites": len(runs), "runs": {d: len(rs) for d, rs in runs.items()},
           "labels": {d: {k: float(np.mean([r[k] for r in rs])) for k in ("flagged", "audit", "audited_harmful",
                                                                           "audited_fine")} for d, rs in runs.items()}}
    for name in names:
        per_site = {}
        for dataset, rs in runs.items():
            site = {"ungated": float(np.mean([r["variants"][name]["corrected"] - r["base"] for r in rs]))}
            for gate in GATES:
                site[gate] = float(np.mean([(r["variants"][name]["corrected"] - r["base"]) * r["variants"][name][gate]
                                            for r in rs]))
                site[f"{gate}_live"] = float(np.mean([r["variants"][name][gate] for r in rs]))
                site[f"{gate}_worst_run"] = float(min((r["variants"][name]["corrected"] - r["base"])
                                                      * r["variants"][name][gate] for r in rs))
            per_site[dataset] = site
        macro = {k: float(np.mean([s[k] for s in per_site.values()])) for k in next(iter(per_site.values()))}
        # does the gate pick the runs that gain? the future gain of the runs each gate lets live against the rest,
        # pooled over sites and seeds, and the correlation of the cross-validated gain with the future gain
        pooled = [r for rs in runs.values() for r in rs]
        future = np.array([r["variants"][name]["corrected"] - r["base"] for r in pooled])
        for gate in GATES:
            live = np.array([r["variants"][name][gate] for r in pooled], dtype=bool)
            macro[f"{gate}_live_gain"] = float(future[live].mean()) if live.any() else None
            macro[f"{gate}_off_gain"] = float(future[~live].mean()) if (~live).any() else None
        checked = [(r["variants"][name]["cv_gain"], g) for r, g in zip(pooled, future)
                   if "cv_gain" in r["variants"][name]]
        macro["cv_gain_correlation"] = float(np.corrcoef(np.array(checked).T)[0, 1]) if len(checked) > 2 else None
        worst = {k: min(s[k] for s in per_site.values()) for k in ["ungated", *GATES]}
        out[name] = {"macro": macro, "worst_site": worst, "datasets": per_site}
    return out


def ceiling(data: dict, variants, *, seeds: int) -> dict:
    """Every history row labelled (as an audit at rate 1), ungated: the most each correction could give here."""
    p = prepared(data)
    gains: dict[str, dict[str, list[float]]] = {}
    for dataset, rows in sites(p).items():
        for seed in range(seeds):
            history, future = halves(rows, seed)
            y = p["label"][history].astype(float)
            base = roc_auc(p["label"][future], p["offset"][future])
            for name, spec in variants:
                spec = spec or {"emb": (EMBEDDING_L2, "global")}
                blocks = _blocks(spec)
                fitted = fit_blocks({k: p[k][history] for k in blocks}, spec, p["offset"][history], y, np.ones(len(y)))
                corrected = apply({k: p[k] for k in blocks}, future, p["offset"][future], fitted)
                gains.setdefault(name, {}).setdefault(dataset, []).append(roc_auc(p["label"][future], corrected)
                                                                          - base)
    return {name: {"macro": float(np.mean([np.mean(g) for g in per.values()])),
                   "datasets": {d: float(np.mean(g)) for d, g in per.items()}} for name, per in gains.items()}


def print_tables(result: dict) -> None:
    """Per variant, at each size: the macro gain ungated, and per gate the macro gain, the share of runs live and the
    worst site's gain; then whether each gate picks the runs that gain."""
    sizes = list(result["sizes"])
    per = lambda name, f: " / ".join(f(result["sizes"][n]) for n in sizes)  # noqa: E731
    print("sites:", json.dumps({d: {k: round(v, 3) for k, v in s.items()} for d, s in result["sites"].items()}))
    print(f"| variant | ungated | worst site | {' | '.join(f'{g}: gain ; live ; worst site' for g in GATES)} |"
          + (" ceiling |" if "ceiling" in result else ""))
    for name in result["variants"]:
        cells = [per(name, lambda x: f"{x[name]['macro']['ungated']:+.3f}"),
                 per(name, lambda x: f"{x[name]['worst_site']['ungated']:+.3f}")]
        for gate in GATES:
            cells.append(" ; ".join((per(name, lambda x: f"{x[name]['macro'][gate]:+.3f}"),
                                     per(name, lambda x: f"{x[name]['macro'][gate + '_live']:.2f}"),
                                     per(name, lambda x: f"{x[name]['worst_site'][gate]:+.3f}"))))
        ceiling_cell = f" {result['ceiling'][name]['macro']:+.3f} |" if "ceiling" in result else ""
        print(f"| {name} | " + " | ".join(cells) + " |" + ceiling_cell)
    print("| variant | corr(cv gain, future gain) | cv10: future gain live / off |")
    fmt = lambda v: "-" if v is None else f"{v:+.3f}"  # noqa: E731
    for name in result["variants"]:
        macro = lambda x, key: fmt(x[name]["macro"][key])  # noqa: E731
        print(f"| {name} | " + per(name, lambda x: macro(x, "cv_gain_correlation")) + " | "
              + per(name, lambda x: f"{macro(x, 'cv10_live_gain')} {macro(x, 'cv10_off_gain')}") + " |")


if __name__ == "__main__":
    main()
