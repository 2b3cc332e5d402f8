"""Score a batch of image requests with the category models each request enabled.

Two steps, so that a batch holds only the models' own work: ``prepare`` turns one request's frames into each enabled
model's input arrays (resizing, cropping, normalising: image work that runs per request, in parallel, before the
batch), and ``score_prepared`` runs each category model once, batched, over the inputs of only the requests that
enabled that category. ``score`` does both, for callers that have no batch. A request's category score is the
maximum over its frames (one bad frame of a GIF is enough); ``safe`` is open_nsfw's ``safe`` output on the frame
with the highest nsfw score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from PIL import Image

NSFW = "nsfw"


class FrameModel(Protocol):
    def prepare(self, frame: Image.Image) -> np.ndarray: ...  # one frame as the model's input

    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]: ...  # prepared inputs, batched


@dataclass(frozen=True)
class ImageRequest:
    frames: list[Image.Image]
    categories: tuple[str, ...]  # enabled categories; always includes "nsfw"


@dataclass(frozen=True)
class PreparedImage:
    """One request's frames as each enabled category's model input (one array per frame): what a batch runs.

    It keeps the request and the model versions it was prepared for: a model swapped in between (whose input may
    differ) prepares the frames again instead of running on another model's input.
    """

    request: ImageRequest
    inputs: dict[str, list[np.ndarray]]
    prepared_for: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ImageScores:
    categories: dict[str, float]
    safe: float
    model_version: str  # e.g. "nsfw=open-nsfw-1.0;weapon=effnet-lite0-1.0"


class ImageScorer:
    """Runs the category models; ``models`` maps category -> model, ``versions`` category -> version string.

    The order of ``models`` is the fixed order of categories in ``model_version``.
    """

    def __init__(self, models: dict[str, FrameModel], versions: dict[str, str]) -> None:
        if NSFW not in models:
            raise ValueError("the nsfw model is required")
        missing = set(models) - set(versions)
        if missing:
            raise ValueError(f"no version given for {sorted(missing)}")
        self._models = models
        self._versions = versions
        self._prepared_for = tuple(sorted(versions.items()))

    @property
    def categories(self) -> frozenset[str]:
        """The categories this scorer has a model for."""
        return frozenset(self._models)

    def score(self, requests: list[ImageRequest]) -> list[ImageScores]:
        return self.score_prepared([self.prepare(request) for request in requests])

    def prepare(self, request: ImageRequest) -> PreparedImage:
        """The request's frames as the input of each model it enabled (ValueError for a request it cannot score)."""
        self._check(request)
        inputs = {
            category: [model.prepare(frame) for frame in request.frames]
            for category, model in self._models.items() if category in request.categories
        }
        return PreparedImage(request, inputs, self._prepared_for)

    def score_prepared(self, prepared: list[PreparedImage]) -> list[ImageScores]:
        prepared = [image if image.prepared_for == self._prepared_for else self.prepare(image.request)
                    for image in prepared]
        outputs = {category: self._run(category, prepared) for category in self._models}
        return [self._scores_of(index, image, outputs) for index, image in enumerate(prepared)]

    def _check(self, request: ImageRequest) -> None:
        if not request.frames:
            raise ValueError("an image request needs at least one frame")
        if NSFW not in request.categories:
            raise ValueError("every image request is scored for nsfw")
        unknown = set(request.categories) - set(self._models)
        if unknown:
            raise ValueError(f"no model for categories {sorted(unknown)}")

    def _run(self, category: str, prepared: list[PreparedImage]) -> dict[int, list[dict[str, float]]]:
        """One batched run over the inputs of the requests that enabled ``category``, split back per request."""
        enabled = [(index, image.inputs[category]) for index, image in enumerate(prepared) if category in image.inputs]
        inputs = [array for _, arrays in enabled for array in arrays]
        if not inputs:
            return {}
        predictions = self._models[category].run(inputs)
        per_request: dict[int, list[dict[str, float]]] = {}
        start = 0
        for index, arrays in enabled:
            per_request[index] = predictions[start : start + len(arrays)]
            start += len(arrays)
        return per_request

    def _scores_of(
        self, index: int, image: PreparedImage, outputs: dict[str, dict[int, list[dict[str, float]]]]
    ) -> ImageScores:
        scored = [category for category in self._models if category in image.inputs]
        worst_nsfw_frame = max(outputs[NSFW][index], key=lambda frame: frame[NSFW])
        return ImageScores(
            categories={category: max(frame[category] for frame in outputs[category][index]) for category in scored},
            safe=worst_nsfw_frame["safe"],
            model_version=";".join(f"{category}={self._versions[category]}" for category in scored),
        )
