"""Score a batch of image requests with the category models each request enabled.

Cost follows the request: within one ``score`` call every category model runs once, batched, over the frames of
only the requests that enabled that category. A request's category score is the maximum over its frames (one bad
frame of a GIF is enough); ``safe`` is open_nsfw's ``safe`` output on the frame with the highest nsfw score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from PIL import Image

NSFW = "nsfw"


class FrameModel(Protocol):
    def predict(self, frames: list[Image.Image]) -> list[dict[str, float]]: ...


@dataclass(frozen=True)
class ImageRequest:
    frames: list[Image.Image]
    categories: tuple[str, ...]  # enabled categories; always includes "nsfw"


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

    @property
    def categories(self) -> frozenset[str]:
        """The categories this scorer has a model for."""
        return frozenset(self._models)

    def score(self, requests: list[ImageRequest]) -> list[ImageScores]:
        for request in requests:
            self._check(request)
        outputs = {category: self._run(category, requests) for category in self._models}
        return [self._scores_of(index, request, outputs) for index, request in enumerate(requests)]

    def _check(self, request: ImageRequest) -> None:
        if not request.frames:
            raise ValueError("an image request needs at least one frame")
        if NSFW not in request.categories:
            raise ValueError("every image request is scored for nsfw")
        unknown = set(request.categories) - set(self._models)
        if unknown:
            raise ValueError(f"no model for categories {sorted(unknown)}")

    def _run(self, category: str, requests: list[ImageRequest]) -> dict[int, list[dict[str, float]]]:
        """One batched predict over the frames of the requests that enabled ``category``, split back per request."""
        enabled = [(index, request) for index, request in enumerate(requests) if category in request.categories]
        frames = [frame for _, request in enabled for frame in request.frames]
        if not frames:
            return {}
        predictions = self._models[category].predict(frames)
        per_request: dict[int, list[dict[str, float]]] = {}
        start = 0
        for index, request in enabled:
            per_request[index] = predictions[start : start + len(request.frames)]
            start += len(request.frames)
        return per_request

    def _scores_of(
        self, index: int, request: ImageRequest, outputs: dict[str, dict[int, list[dict[str, float]]]]
    ) -> ImageScores:
        scored = [category for category in self._models if category in request.categories]
        worst_nsfw_frame = max(outputs[NSFW][index], key=lambda frame: frame[NSFW])
        return ImageScores(
            categories={category: max(frame[category] for frame in outputs[category][index]) for category in scored},
            safe=worst_nsfw_frame["safe"],
            model_version=";".join(f"{category}={self._versions[category]}" for category in scored),
        )
