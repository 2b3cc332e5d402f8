"""Score a batch of texts with the text model: the text twin of `models.image_scoring`.

The text model's `predict` returns, per text, a score for each category it serves (`toxic` at least).
The scorer keeps those categories and stamps the version they came from, so a response always names
the model that produced its scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

TOXIC = "toxic"


class TextModel(Protocol):
    def predict(self, texts: list[str]) -> list[dict[str, float]]: ...


@dataclass(frozen=True)
class TextScores:
    categories: dict[str, float]
    model_version: str


class TextScorer:
    def __init__(self, model: TextModel, version: str) -> None:
        self._model = model
        self.version = version

    def score(self, texts: list[str]) -> list[TextScores]:
        predictions = self._model.predict(texts)
        if len(predictions) != len(texts):
            raise ValueError(f"the text model answered {len(predictions)} results for {len(texts)} texts")
        return [TextScores(categories=self._categories(p), model_version=self.version) for p in predictions]

    @staticmethod
    def _categories(prediction: dict[str, float]) -> dict[str, float]:
        if TOXIC not in prediction:
            raise ValueError("the text model must score 'toxic'")
        return {category: float(score) for category, score in prediction.items()}
