"""Side heads of the text model: one logistic regression per category on the fine-tuned encoder's embedding.

The fine-tuned encoder and its multi-label head (`use-ft.pt`) were trained end to end on a GPU. Categories whose
real data arrived later (threat, with EDOS's personal threats) or that have almost none (self_harm,
violent_speech) get a linear head each on the same 512-dimensional embedding the main head reads: it costs one dot
product per window, needs no new encoder pass, and is retrained on a CPU in minutes
(`training/side_heads.py`). A side head named as a category of the main head replaces that output; any other
adds a category.

`side-heads.json`, beside the weights: {"base_model_version", "categories": {name: {"weights": [512 floats],
"bias": float, "beta": bool, "gate": category (optional)}}}. A gated head's probability is multiplied by the main
head's probability of the gate category in the same window: threat is gated by toxic, so that a sentence must be
hostile to be a threat (ungated, the threat head sent short pleasant sentences such as a thank-you note to review:
they look like the short, clean personal threats it learned from). Its hash is part of the served model version,
so a retrained side head is a new version (thresholds, model card and serve config name it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

SIDE_HEADS_FILE = "side-heads.json"  # beside the weights; absent: the main head's categories only
EMBEDDING_SIZE = 512


class SideHeadMismatch(ValueError):
    """The side-heads file belongs to another encoder, or a head has the wrong shape."""


class SideHeads:
    def __init__(self, heads: dict[str, dict], base_model_version: str) -> None:
        for name, head in heads.items():
            if len(head["weights"]) != EMBEDDING_SIZE:
                raise SideHeadMismatch(f"side head {name!r} has {len(head['weights'])} weights, not {EMBEDDING_SIZE}")
        self.base_model_version = base_model_version
        self.categories: tuple[str, ...] = tuple(heads)
        self.beta_categories: tuple[str, ...] = tuple(name for name, head in heads.items() if head.get("beta"))
        self._weights = np.array([heads[name]["weights"] for name in self.categories], dtype=np.float64).reshape(
            len(self.categories), EMBEDDING_SIZE)
        self._bias = np.array([heads[name]["bias"] for name in self.categories], dtype=np.float64)
        self.gates: dict[str, str] = {name: head["gate"] for name, head in heads.items() if head.get("gate")}
        self.digest = _digest(heads)

    @classmethod
    def none(cls, base_model_version: str = "") -> "SideHeads":
        return cls({}, base_model_version)

    @classmethod
    def read(cls, path: Path, base_model_version: str) -> "SideHeads":
        """The heads of `path`; none when the file does not exist. A file fitted on another encoder is refused:
        its heads would read embeddings they were never trained on."""
        if not Path(path).exists():
            return cls.none(base_model_version)
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document.get("base_model_version") != base_model_version:
            raise SideHeadMismatch(f"{path} is for {document.get('base_model_version')}, not {base_model_version}")
        return cls(document["categories"], base_model_version)

    def scores(self, scaled_embeddings: np.ndarray, main: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """(windows x side categories) probabilities from embeddings already scaled as the main head's input;
        `main`: the main head's probabilities per category (windows,), which gated heads are multiplied by."""
        logits = np.asarray(scaled_embeddings, dtype=np.float64) @ self._weights.T + self._bias
        probabilities = 1.0 / (1.0 + np.exp(-np.clip(logits, -60.0, 60.0)))
        for column, name in enumerate(self.categories):
            if name in self.gates:
                if main is None or self.gates[name] not in main:
                    raise SideHeadMismatch(f"side head {name!r} is gated by {self.gates[name]!r}, which was not given")
                probabilities[:, column] *= main[self.gates[name]]
        return probabilities

    def served_version(self, base_model_version: str) -> str:
        """The model version with these heads: the base version, plus the heads' hash when there are any."""
        return f"{base_model_version}-sh{self.digest}" if self.categories else base_model_version


def document(heads: dict[str, dict], base_model_version: str) -> dict:
    """The JSON document `SideHeads.read` loads (training writes it)."""
    return {"base_model_version": base_model_version, "categories": heads}


def _digest(heads: dict[str, dict]) -> str:
    return hashlib.sha256(json.dumps(heads, sort_keys=True).encode("utf-8")).hexdigest()[:8]
