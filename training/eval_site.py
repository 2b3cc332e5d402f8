"""`make eval-site`: does learning each site's line from its moderators pay (adaptation/correction.py, backtest.py)?

Each dataset stands for a site the model never trained on, by training/loso.py's recipe: the served encoder's
cached window embeddings, a toxic head fitted without the dataset, per-language review thresholds fitted on the other
datasets' dev rows; a text's base score is its worst window's. For each dataset D (its dev and test rows, as LOSO
scores them) and seed, training/label_walk.py's replay: shuffle the rows, first half = history, second half =
future; walk the history in order, a row at or above its review threshold flagged (label, rate 1), an allowed row
audited with probability AUDIT_RATE (rate 0.1), an allowed toxic row not audited reported with probability
REPORT_RATE (rate 1); stop at N labels (or the end of the history: the site then counts only for the N it
reached). A label's embedding is the worst window's, its served logit the base logit. `fit_correction` on them; on
the future half: the base AUC, the corrected AUC (the fitted correction whether or not its gate let it live) and the
served AUC (corrected only where the gate made it live). Then `backtest` on the history labels (scored as served now)
suggests a review threshold for a benign-flagged target of 10%; on the future half, its benign-flagged share and
recall against the base thresholds'.
Figures are means over SEEDS seeds per site, then means over sites (macro) and over a language's sites.

How `fit_correction`'s default L2 was chosen with `--l2` (several values compared), and the ceiling of a linear
correction on these sites: docs/site-adaptation.md, "Experiments kept as records".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np

from adaptation.backtest import backtest
from adaptation.correction import L2, fit_correction
from adaptation.labels import Label, logit
from training import loso
from training.label_walk import AUDIT_RATE, REPORT_RATE, halves, replay, walk, walk_rng
from training.metrics import roc_auc
from training.reports import REPORTS_DIR
from training.text_data import REPO_ROOT, load_comments

SIZES = (50, 100, 200, 500)
SEEDS = 5
TARGET_BENIGN_FLAGGED = 0.10
OUT_OF_FOLD = True
REPORT = REPORTS_DIR / "site-report.json"


def main() -> None:
    import torch

    from models.text_toxicity import TextToxicityModel

    parser = argparse.ArgumentParser()
    parser.add_argument("--l2", type=float, nargs="*", default=[L2], help="several: compare them, store the first")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.time()
    model = TextToxicityModel.load(threads=1)
    base = base_scores(model, load_comments())
    print(f"base scores of {len(base['label'])} rows in {time.time() - started:.0f} s")
    results = {}
    for l2 in args.l2:
        results[l2] = simulate(base, l2=l2, seeds=args.seeds)
        print(f"l2 {l2:g}: " + json.dumps({n: {k: results[l2]["sizes"][n][k] for k in ("sites", "gain_served",
              "gain_corrected", "active", "worst_site_served")} for n in results[l2]["sizes"]}))
    stored = results[args.l2[0]]
    stored["seconds"] = round(time.time() - started)
    stored["model_version"] = model.model_version
    REPORT.write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {REPORT.relative_to(REPO_ROOT)} in {stored['seconds']} s")


def base_scores(model, comments) -> dict[str, np.ndarray]:
    """Every dev and test row's out-of-source base score (LOSO head without its dataset, worst window), its review
    threshold, and its worst window's embedding; cached under .data/loso/ (the heads take minutes)."""
    from models import language_id
    from models.text_toxicity import split_windows

    rows = loso._rows(comments)
    train = [c for c in rows if c.split == "train"]
    scored = [c for c in rows if c.split != "train"]
    digest = hashlib.sha256(json.dumps(loso._key(model, comments)).encode("utf-8")).hexdigest()[:16]
    path = loso.CACHE_DIR / f"site-base-{digest}.npz"
    if path.exists():
        return dict(np.load(path, allow_pickle=False))
    first = loso._cached(model, [loso._first_window(c.text, model.window_chars) for c in train], "first")
    windows = [split_windows(c.text, model.window_chars) or [""] for c in scored]
    owner = np.repeat(np.arange(len(scored)), [len(w) for w in windows])
    window_x = loso._cached(model, [w for ws in windows for w in ws], "windows")
    detected = [language_id.language_of(c.text) for c in scored]
    train_sets, scored_sets = np.array([c.dataset for c in train]), np.array([c.dataset for c in scored])
    labels = np.array([c.label for c in scored])
    langs = np.array([c.lang for c in scored])
    dev = np.array([c.split == "dev" for c in scored])
    score, threshold = np.full(len(scored), np.nan), np.full(len(scored), np.nan)
    worst = np.zeros(len(scored), dtype=np.int64)
    for dataset in sorted(set(scored_sets)):
        keep = np.where(train_sets != dataset)[0]
        window_scores = loso._predict(loso._fit(first[keep], [train[i] for i in keep]), window_x)
        text_scores = np.full(len(scored), -np.inf)
        np.maximum.at(text_scores, owner, window_scores)
        others = (scored_sets != dataset) & dev
        thresholds = loso._thresholds(text_scores[others], labels[others], langs[others])
        held = np.where(scored_sets == dataset)[0]
        score[held] = text_scores[held]
        threshold[held] = [thresholds.get(detected[i], thresholds["*"]) for i in held]
        order = np.lexsort((-window_scores, owner))  # per text, its windows from the worst down
        starts = np.searchsorted(owner[order], held)
        worst[held] = order[starts]
        print(f"  base {dataset}: AUC {roc_auc(labels[held], score[held]):.3f}")
    base = {"dataset": scored_sets, "lang": langs, "label": labels, "score": score, "threshold": threshold,
            "embedding": window_x[worst].astype(np.float32)}
    loso.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.savez(path, **base)
    return base


def simulate(base: dict, *, l2: float, seeds: int = SEEDS, sizes=SIZES) -> dict:
    """Every site (dataset with both classes), seed and number of labels; figures per site, language and macro."""
    sites, site_lang = {}, {}
    for dataset in sorted(set(base["dataset"].tolist())):
        rows = np.where(base["dataset"] == dataset)[0]
        if len(set(base["label"][rows].tolist())) < 2:
            continue  # positives only (EDOS, Toxic Spans): no AUC, no benign share
        langs, counts = np.unique(base["lang"][rows], return_counts=True)
        sites[dataset], site_lang[dataset] = rows, str(langs[np.argmax(counts)])
    runs = replay(sites, seeds, sizes, lambda history, future, n, seed: site_run(base, history, future, n, l2, seed))
    return {"l2": l2, "seeds": seeds, "audit_rate": AUDIT_RATE, "report_rate": REPORT_RATE,
            "target_benign_flagged": TARGET_BENIGN_FLAGGED,
            "sizes": {str(n): _summary(runs[n], site_lang) for n in sizes},
            "ceiling": ceiling(base, list(site_lang), l2, seeds)}


def ceiling(base: dict, sites: list[str], l2: float, seeds: int) -> dict:
    """What the correction could give at best here: every history row labelled (as an audit at rate 1, so no
    sampling noise and no queue bias), the future scored as above."""
    gains: dict[str, list[tuple[float, float]]] = {}
    for dataset in sites:
        rows = np.where(base["dataset"] == dataset)[0]
        for seed in range(seeds):
            history, future = halves(rows, seed)
            labels = [Label(base["embedding"][i], logit(base["score"][i]), bool(base["label"][i]), "audit", 1.0,
                            None, 0.0) for i in history]
            fit = fit_correction(labels, l2=l2, seed=seed)
            y = base["label"][future].astype(bool)
            base_logit = np.array([logit(s) for s in base["score"][future]])
            corrected = base_logit + base["embedding"][future] @ fit.correction.weights + fit.correction.bias
            served = roc_auc(y, corrected) if fit.active else roc_auc(y, base_logit)
            gains.setdefault(dataset, []).append((roc_auc(y, corrected) - roc_auc(y, base_logit),
                                                  served - roc_auc(y, base_logit)))
    per_site = {d: {"corrected": float(np.mean([g[0] for g in v])), "served": float(np.mean([g[1] for g in v]))}
                for d, v in gains.items()}
    return {"history_rows": float(np.mean([len(np.where(base["dataset"] == d)[0]) // 2 for d in sites])),
            "gain_corrected": float(np.mean([s["corrected"] for s in per_site.values()])),
            "gain_served": float(np.mean([s["served"] for s in per_site.values()])), "datasets": per_site}


def site_labels(base: dict, history: np.ndarray, n: int, rng: np.random.Generator) -> tuple[list[Label], int]:
    """The labels a site's queue would have given after enough history for n of them (flagged: at or above the
    row's review threshold), as adaptation keeps them, and how many rows that took."""
    walked = walk(base["score"] >= base["threshold"], base["label"], history, n, rng)
    labels = [Label(base["embedding"][i], logit(float(base["score"][i])), bool(base["label"][i]), seen, rate,
                    str(base["lang"][i]), at)
              for i, seen, rate, at in zip(walked.rows, walked.seen, walked.rates, walked.at)]
    return labels, walked.taken


def site_run(base: dict, history: np.ndarray, future: np.ndarray, n: int, l2: float, seed: int) -> dict | None:
    labels, taken = site_labels(base, history, n, walk_rng(seed))
    if len(labels) < n:
        return None
    fit = fit_correction(labels, l2=l2, seed=seed)
    y = base["label"][future].astype(bool)
    base_logit = np.array([logit(s) for s in base["score"][future]])
    corrected_logit = base_logit + base["embedding"][future] @ fit.correction.weights + fit.correction.bias \
        if fit.correction is not None else base_logit
    served_logit = corrected_logit if fit.active else base_logit
    # the backtest on the history labels, scored as the site would now be served: where the correction is live, by
    # the fold that held each label out (in sample, the labels it was fitted on look better separated than they are)
    label_logit = np.array([lab.served_logit for lab in labels])
    if fit.active:
        in_sample = label_logit + np.stack([lab.embedding for lab in labels]) @ fit.correction.weights \
            + fit.correction.bias
        held_out = fit.out_of_fold if OUT_OF_FOLD else None
        label_logit = in_sample if held_out is None else np.where(np.isnan(held_out), in_sample, held_out)
    review = float(np.mean(base["threshold"][history]))
    test = backtest(_sigmoid(label_logit), labels, review=review, block=1.0,
                    target_benign_flagged=TARGET_BENIGN_FLAGGED)
    suggested = test.suggested_thresholds["review"] if test.suggested_thresholds else None
    base_flags = base["score"][future] >= base["threshold"][future]
    suggested_flags = _sigmoid(served_logit) >= suggested if suggested is not None else base_flags
    return {"taken": taken, "active": fit.active, "base": roc_auc(y, base_logit),
            "corrected": roc_auc(y, corrected_logit), "served": roc_auc(y, served_logit),
            "base_benign_flagged": float(base_flags[~y].mean()), "base_recall": float(base_flags[y].mean()),
            "suggested_benign_flagged": float(suggested_flags[~y].mean()),
            "suggested_recall": float(suggested_flags[y].mean())}


_KEYS = ("taken", "active", "base", "corrected", "served", "base_benign_flagged", "base_recall",
         "suggested_benign_flagged", "suggested_recall")


def _summary(runs: dict[str, list[dict]], site_lang: dict[str, str]) -> dict:
    sites = {d: {k: float(np.mean([r[k] for r in rs])) for k in _KEYS} | {"runs": len(rs), "lang": site_lang[d]}
             for d, rs in runs.items() if rs}
    if not sites:
        return {"sites": 0}
    macro = {k: float(np.mean([s[k] for s in sites.values()])) for k in _KEYS}
    languages = {}
    for lang in sorted({s["lang"] for s in sites.values()}):
        own = [s for s in sites.values() if s["lang"] == lang]
        languages[lang] = {k: float(np.mean([s[k] for s in own])) for k in ("base", "corrected", "served")}
    served_drop = {d: s["served"] - s["base"] for d, s in sites.items()}
    worst = min(served_drop, key=served_drop.get)
    runs_drop = min(r["served"] - r["base"] for rs in runs.values() for r in rs)
    return {"sites": len(sites), "macro": macro, "gain_corrected": macro["corrected"] - macro["base"],
            "gain_served": macro["served"] - macro["base"], "active": macro["active"],
            "worst_site_served": {"dataset": worst, "gain": served_drop[worst]}, "worst_run_served": runs_drop,
            "max_site_suggested_benign_flagged": max(s["suggested_benign_flagged"] for s in sites.values()),
            "datasets": sites, "languages": languages}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


if __name__ == "__main__":
    main()
