"""The card's "Candidate encoders": EmbeddingGemma frozen and its blends with the served encoder, out of source
(training/loso_encoders.py, `candidate_encoders` of `reports/loso-report.json`)."""

from __future__ import annotations

import json

from training.model_card.numbers import figure, mean_of_known, recall_and_flagged


def candidate_encoders_section(report: dict) -> str:
    """LOSO per language for EmbeddingGemma frozen and its blends with the served encoder (training/loso_encoders.py),
    or a line saying how to measure them."""
    candidates = report.get("candidate_encoders")
    if not candidates:
        return ("#### Candidate encoders\n\nNot measured for this model and data yet (`make gemma`, then "
                "`python -m training.loso_encoders`).")
    best, shipped = candidates["best_share"], shipped_blend_share()
    columns = [("served encoder (share 1)", candidates["served"]), ("Gemma alone (share 0)", candidates["gemma"]),
               (f"blend, share {best:g} (best)", candidates["blend_best"])]
    rows = ["| language | " + " | ".join(name for name, _ in columns) + " | blend: recall / benign flagged |",
            "|---|" + "---:|" * len(columns) + "---|"]
    for lang in candidates["served"]["languages"]:
        rows.append(f"| {lang} | " + " | ".join(figure(c["languages"][lang]["auc"]) for _, c in columns)
                    + f" | {recall_and_flagged(candidates['blend_best']['languages'][lang])} |")
    rows.append("| **macro** | " + " | ".join(f"**{figure(c['macro_languages'])}**" for _, c in columns)
                + f" | {recall_and_flagged(candidates['blend_best']['pooled'])} (pooled) |")
    rows.append("| macro over datasets | " + " | ".join(figure(c["macro_datasets"]) for _, c in columns) + " | |")
    rows.append(f"| macro over the {len(unseen_datasets(candidates['served']))} datasets the served encoder never "
                "trained on (clean) | " + " | ".join(figure(mean_of_known([c["datasets"][d]["auc"] for d in
                                                                unseen_datasets(candidates["served"])]))
                                                for _, c in columns) + " | |")
    by_share = ", ".join(f"{float(s):g}: {v:.3f}" for s, v in candidates["macro_languages"].items())
    shipped_line = ""
    if shipped is not None and str(float(shipped)) in candidates["macro_languages"]:
        shipped_line = (f" The served blend (`gemma-blend.json`) ships share {shipped:g} (chosen on the training "
                        f"sources' dev split): {candidates['macro_languages'][str(float(shipped))]:.3f} here.")
    return f"""#### Candidate encoders

The same recipe (`training/loso_encoders.py`) on a smaller fixed sample, since EmbeddingGemma-300M embeds about 15
texts a second per core here: at most {candidates['rows_per_dataset']['train']} train rows and
{candidates['rows_per_dataset']['scored']} dev and test rows a dataset ({candidates['train_rows']} and
{candidates['scored_rows']} rows). For each left-out dataset a head is fitted on each encoder's features (Gemma: its
int8 export, frozen, the first 128 tokens of each window), each head's logits are z-scored on the other datasets'
dev windows and mixed as the served blend mixes them: share x served encoder + (1 - share) x Gemma. The served
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


def unseen_datasets(summary: dict) -> list[str]:
    """The datasets the served encoder never trained on that have both classes in `summary`."""
    from training.loso import SERVED_TRAINING_EXCLUDES

    return [d for d in SERVED_TRAINING_EXCLUDES if d in summary["datasets"]
            and summary["datasets"][d]["auc"] == summary["datasets"][d]["auc"]]


def shipped_blend_share() -> float | None:
    from models.text_gemma_blend import BLEND_FILE
    from models.text_toxicity import DEFAULT_WEIGHTS

    path = DEFAULT_WEIGHTS.with_name(BLEND_FILE)
    return json.loads(path.read_text(encoding="utf-8"))["use_share"] if path.exists() else None
