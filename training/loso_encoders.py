"""Leave-one-source-out figures for the candidate encoders: EmbeddingGemma-300M frozen, and its blend with the served
encoder, by exactly the recipe of `training/loso.py` (same rows, windows, heads, thresholds and summaries).

For each dataset D, a toxic head is fitted without D on each encoder's features (the first window of the other
datasets' train rows), both heads score every window, and their logits are mixed as the served blend mixes them
(`models/text_gemma_blend.py`): each z-scored with its mean and spread over the other datasets' dev windows, then
`share * z(served encoder) + (1 - share) * z(Gemma)`. The worst window counts; the review threshold per detected
language comes from the other datasets' dev rows. Every share from 0 (Gemma alone) to 1 (the served encoder alone)
is reported, so the share can be chosen on out-of-source figures rather than on the training sources' own dev split.

    make gemma                          # once: the Gemma export
    python -m training.loso_encoders    # embeds about 90,000 texts with Gemma the first time (cached), then fits

Stored in `models/weights/text/reports/loso-report.json` under `candidate_encoders`, keyed like the rest of that file;
`make eval-text` renders it in the model card.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from models import language_id
from models.text_toxicity import TextToxicityModel, split_windows
from training import loso
from training.metrics import roc_auc
from training.text_data import load_comments

# Gemma embeds about 15 texts a second per core on a CPU without AVX-512 VNNI (75 ms for one short text), so the
# rows are a fixed hash-ordered sample per dataset, smaller than loso.py's; the served encoder is measured on the
# same sample (share 1.0), so the comparison is like for like.
TRAIN_ROWS_PER_DATASET = 1500
SCORED_ROWS_PER_DATASET = 500
EMBED_CHUNK = 5000
SHARES = tuple(round(s, 1) for s in np.linspace(0.0, 1.0, 11))  # the served encoder's share of the blend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--train-rows-per-dataset", type=int, default=TRAIN_ROWS_PER_DATASET)
    parser.add_argument("--scored-rows-per-dataset", type=int, default=SCORED_ROWS_PER_DATASET)
    args = parser.parse_args()
    model = TextToxicityModel.load(threads=args.workers)
    comments = load_comments()
    started = time.time()
    sample, gemma = sample_and_gemma(model, comments, args.train_rows_per_dataset, args.scored_rows_per_dataset,
                                     args.workers)
    train, scored = sample.train, sample.scored
    held = leave_each_out(train, scored, sample.owner, sample.detected(), {"served": sample.served, "gemma": gemma})
    shares = {str(share): loso._summary(scored, held[share]) for share in SHARES}
    best = max(shares, key=lambda s: shares[s]["macro_languages"])
    report = json.loads(loso.REPORT.read_text(encoding="utf-8"))
    if report.get("key") != loso._key(model, comments):
        raise SystemExit("loso-report.json is for another model or other data: run `make eval-text` first")
    report["candidate_encoders"] = {
        "recipe": "training/loso_encoders.py: the LOSO recipe on each encoder, logits z-scored and mixed",
        "gemma_model": "EmbeddingGemma-300M int8 ONNX, first 128 tokens of each window, frozen",
        "train_rows": len(train), "scored_rows": len(scored),
        "rows_per_dataset": {"train": args.train_rows_per_dataset, "scored": args.scored_rows_per_dataset}, "best_share": float(best),
        "macro_languages": {s: round(v["macro_languages"], 4) for s, v in shares.items()},
        "macro_datasets": {s: round(v["macro_datasets"], 4) for s, v in shares.items()},
        "gemma": shares["0.0"], "served": shares["1.0"], "blend_best": shares[best],
        "seconds": round(time.time() - started)}
    loso.REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report["candidate_encoders"]["macro_languages"]), "best share", best)


@dataclass
class Sample:
    """Rows cut as training/loso.py cuts them: the first window of each train row, every window of each scored
    (dev or test) row, `owner` mapping a window to its scored row; `served` the served encoder's features."""

    train: list
    scored: list
    first_texts: list[str]
    window_texts: list[str]
    owner: np.ndarray
    served: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, model: TextToxicityModel, rows: list) -> "Sample":
        train = [c for c in rows if c.split == "train"]
        scored = [c for c in rows if c.split != "train"]
        first_texts = [loso._first_window(c.text, model.window_chars) for c in train]
        windows = [split_windows(c.text, model.window_chars) or [""] for c in scored]
        window_texts = [w for ws in windows for w in ws]
        owner = np.repeat(np.arange(len(scored)), [len(w) for w in windows])
        served = (loso._cached(model, first_texts, "first"), loso._cached(model, window_texts, "windows"))
        return cls(train, scored, first_texts, window_texts, owner, served)

    def features(self, vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(first windows of train, every scored window) from a text -> vector mapping."""
        return (np.stack([vectors[t] for t in self.first_texts]), np.stack([vectors[t] for t in self.window_texts]))

    def detected(self) -> list[str | None]:
        return [language_id.language_of(c.text) for c in self.scored]


def sample_rows(comments, train_per_dataset: int, scored_per_dataset: int) -> list:
    """Per dataset, at most `train_per_dataset` train rows and `scored_per_dataset` dev and test rows, each the
    first of a fixed hash order (loso.py's order, so its train sample contains this one)."""
    by_key: dict[tuple, list] = {}
    for c in comments:
        kind = "train" if c.split == "train" else "scored" if c.split in loso.SCORED_SPLITS else None
        if kind:
            by_key.setdefault((c.dataset, kind), []).append(c)
    kept = []
    for (_, kind), rows in sorted(by_key.items()):
        rows.sort(key=lambda c: hashlib.sha1(("loso" + c.text).encode("utf-8")).hexdigest())
        kept.extend(rows[:train_per_dataset if kind == "train" else scored_per_dataset])
    return kept


def leave_each_out(train, scored, owner, detected, features: dict) -> dict:
    """{share: {"score", "flagged"}} for the mix of the "served" and "gemma" heads, each fitted without the
    scored row's dataset. `features`: encoder -> (first windows of `train`, every window of `scored`)."""
    labels = np.array([c.label for c in scored])
    langs = np.array([c.lang for c in scored])
    held = {share: {"score": np.full(len(scored), np.nan), "flagged": np.zeros(len(scored), dtype=bool)}
            for share in SHARES}
    for dataset, mine, other_dev, logits in held_out_window_logits(train, scored, features):
        other_dev_windows = other_dev[owner]
        z = {encoder: z_scored(logit, other_dev_windows) for encoder, logit in logits.items()}
        for share in SHARES:
            text_scores = np.full(len(scored), -np.inf)
            np.maximum.at(text_scores, owner, share * z["served"] + (1 - share) * z["gemma"])
            thresholds = loso._thresholds(text_scores[other_dev], labels[other_dev], langs[other_dev])
            held[share]["score"][mine] = text_scores[mine]
            held[share]["flagged"][mine] = [text_scores[i] >= thresholds.get(detected[i], thresholds["*"])
                                            for i in mine]
        print(f"  {dataset}: " + ", ".join(f"{s}: {roc_auc(labels[mine], held[s]['score'][mine]):.3f}"
                                           for s in (0.0, 0.5, 1.0)))
    return held


def held_out_window_logits(train, scored, features: dict):
    """Per left-out dataset, in name order: (dataset, indices of its rows in `scored`, mask of the other datasets'
    dev rows in `scored`, {encoder: the logit of every scored window under a head fitted without the dataset})."""
    train_sets, scored_sets = np.array([c.dataset for c in train]), np.array([c.dataset for c in scored])
    is_dev = np.array([c.split == "dev" for c in scored])
    for dataset in sorted(set(scored_sets)):
        rows = np.where(train_sets != dataset)[0]
        logits = {encoder: window_logits(loso._fit(first[rows], [train[i] for i in rows]), window_x)
                  for encoder, (first, window_x) in features.items()}
        yield dataset, np.where(scored_sets == dataset)[0], (scored_sets != dataset) & is_dev, logits


def z_scored(logit: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """`logit` less its mean over the `reference` mask, over its spread there."""
    return (logit - logit[reference].mean()) / logit[reference].std()


def sample_and_gemma(model, comments, train_per_dataset: int, scored_per_dataset: int, workers: int):
    """The sample (served features cached under .data/loso/) and Gemma's features of it (cached by
    training/fit_gemma_blend.embed, saved after every chunk of EMBED_CHUNK texts)."""
    from training.fit_gemma_blend import embed

    started = time.time()
    sample = Sample.of(model, sample_rows(comments, train_per_dataset, scored_per_dataset))
    vectors = {}
    texts = sorted(set(sample.first_texts + sample.window_texts))
    for start in range(0, len(texts), EMBED_CHUNK):  # the cache is saved after each chunk: a stop loses one
        vectors.update(embed(texts[start:start + EMBED_CHUNK], workers))
    gemma = sample.features(vectors)
    print(f"features of {len(sample.train)} train rows and {len(sample.window_texts)} windows in "
          f"{time.time() - started:.0f} s")
    return sample, gemma


@torch.no_grad()
def window_logits(head: torch.nn.Linear, x: np.ndarray) -> np.ndarray:
    return head(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))[:, 0].double().numpy()


if __name__ == "__main__":
    main()
