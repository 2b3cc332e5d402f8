"""How much of EmbeddingGemma's out-of-source gain survives when only its first layers run: the question behind a
strong default encoder at a cost the service can carry (a transformer's cost is about linear in its layers). An
experiment kept as a record; its figures: docs/text-model.md, "Experiments kept as records".

For each depth k, the mean-pooled hidden state after Gemma's layer k (of 24; fp32 torch, the prompt of
`models.embeddinggemma`, first 128 tokens of each window), standardised on the train rows, goes through the
leave-one-source-out recipe of `training/loso_encoders.py`, alone and blended with the served encoder; the full
int8 export (the served blend's encoder) is the reference on the same rows. Cost is p50 for one short text on one
thread, torch fp32, each depth against the full 24 layers.

    make gemma                                  # once: the weights
    python -m training.experiments.gemma_depth  # about 20,000 texts through 12 layers: a quarter of an hour on 2 cores

Writes `models/weights/text/reports/gemma-depth-report.json`; docs/text-model.md quotes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np

from models.embeddinggemma import CLASSIFICATION_PROMPT, MAX_TOKENS, gemma_dir
from models.text_toxicity import TextToxicityModel
from training import loso, loso_encoders
from training.reports import REPORTS_DIR
from training.text_data import REPO_ROOT, load_comments

REPORT = REPORTS_DIR / "gemma-depth-report.json"
CACHE_DIR = REPO_ROOT / ".data" / "gemma-depth"
DEPTHS = (2, 4, 6, 8, 12)
BATCH = 32


def main() -> None:
    from training.fit_gemma_blend import embed

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-rows-per-dataset", type=int, default=750)
    parser.add_argument("--scored-rows-per-dataset", type=int, default=250)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    started = time.time()
    model = TextToxicityModel.load(threads=args.threads)
    rows = loso_encoders.sample_rows(load_comments(), args.train_rows_per_dataset, args.scored_rows_per_dataset)
    sample = loso_encoders.Sample.of(model, rows)
    train, scored, owner, served = sample.train, sample.scored, sample.owner, sample.served
    texts = sample.first_texts + sample.window_texts
    full = sample.features(embed(texts, args.threads))
    by_depth = hidden_states(texts, args.threads)
    detected = sample.detected()
    candidates = {"full int8 (24 layers)": full}
    for depth in DEPTHS:
        x = by_depth[depth]
        mean, std = x[:len(train)].mean(0), x[:len(train)].std(0) + 1e-6
        x = ((x - mean) / std).astype(np.float32)
        candidates[f"first {depth} layers"] = (x[:len(train)], x[len(train):])
    report = {"train_rows": len(train), "scored_rows": len(scored), "candidates": {}}
    unseen = [d for d in loso.SERVED_TRAINING_EXCLUDES if d in {c.dataset for c in scored}]
    for name, features in candidates.items():
        held = loso_encoders.leave_each_out(train, scored, owner, detected, {"served": served, "gemma": features})
        shares = {share: loso._summary(scored, held[share]) for share in loso_encoders.SHARES}
        best = max(shares, key=lambda s: shares[s]["macro_languages"])
        report["candidates"][name] = {
            "alone": round(shares[0.0]["macro_languages"], 4), "best_share": best,
            "blend": round(shares[best]["macro_languages"], 4),
            "blend_unseen": _clean_macro(shares[best], unseen), "alone_unseen": _clean_macro(shares[0.0], unseen),
            "languages_alone": {k: round(v["auc"], 3) for k, v in shares[0.0]["languages"].items()},
            "languages_blend": {k: round(v["auc"], 3) for k, v in shares[best]["languages"].items()}}
        if name == "full int8 (24 layers)":  # share 1 is the served encoder alone, the same for every candidate
            report["served_encoder"] = {"macro_languages": round(shares[1.0]["macro_languages"], 4),
                                        "unseen": _clean_macro(shares[1.0], unseen)}
        print(name, {k: v for k, v in report["candidates"][name].items() if not k.startswith("languages")})
    report["cost_ms_p50_fp32_one_thread"] = cost_by_depth()
    report["seconds"] = round(time.time() - started)
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report["served_encoder"]), json.dumps(report["cost_ms_p50_fp32_one_thread"]))


def _clean_macro(summary: dict, datasets: list[str]) -> float:
    aucs = [summary["datasets"][d]["auc"] for d in datasets if summary["datasets"][d]["auc"] == summary["datasets"][d]["auc"]]
    return round(float(np.mean(aucs)), 4)


def _truncated_model(depth: int):
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(str(gemma_dir()))
    config.num_hidden_layers = depth
    config.layer_types = config.layer_types[:depth]
    return AutoModel.from_pretrained(str(gemma_dir()), config=config, dtype=torch.float32).eval()


def _batches(texts: list[str]):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(gemma_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    encodings = tokenizer.encode_batch([CLASSIFICATION_PROMPT + text for text in texts])
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), BATCH):
        rows = order[start:start + BATCH]
        width = max(len(encodings[i].ids) for i in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        for row, i in enumerate(rows):
            ids[row, :len(encodings[i].ids)] = encodings[i].ids
        yield rows, ids, (ids != 0).astype(np.int64)


def hidden_states(texts: list[str], threads: int) -> dict[int, np.ndarray]:
    """{depth: mean-pooled hidden state after that layer, (len(texts), 768)}, cached under .data/gemma-depth/."""
    import torch

    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:16]
    path = CACHE_DIR / f"{digest}.npz"
    if path.exists():
        stored = np.load(path)
        return {depth: stored[str(depth)] for depth in DEPTHS}
    torch.set_num_threads(threads)
    model = _truncated_model(max(DEPTHS))
    out = {depth: np.empty((len(texts), 768), dtype=np.float32) for depth in DEPTHS}
    with torch.inference_mode():
        for rows, ids, mask in _batches(texts):
            result = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                           output_hidden_states=True)
            weights = torch.from_numpy(mask).unsqueeze(-1).float()
            for depth in DEPTHS:
                hidden = result.hidden_states[depth]  # [0] is the embedding layer's output
                out[depth][rows] = ((hidden * weights).sum(1) / weights.sum(1)).numpy()
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{str(depth): x for depth, x in out.items()})
    return out


def cost_by_depth(repeats: int = 20) -> dict[str, float]:
    """p50 ms for one short text, one thread, torch fp32, at each depth and at all 24 layers."""
    import torch

    torch.set_num_threads(1)
    text = "you are such an idiot, nobody wants you here"
    result = {}
    for depth in (*DEPTHS, 24):
        model = _truncated_model(depth)
        (_, ids, mask), = list(_batches([text]))
        times = []
        with torch.inference_mode():
            model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))  # warm-up
            for _ in range(repeats):
                started = time.perf_counter()
                model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
                times.append(time.perf_counter() - started)
        result[str(depth)] = round(1000 * float(np.median(times)), 1)
    return result


if __name__ == "__main__":
    main()
