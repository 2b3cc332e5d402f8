"""Model backends in this process: the real models without Ray.

For the API tests, benchmarks and tools; under Ray Serve the ingress uses
`deployments.handles.ServeBackends` instead. Models come from the same registry and
are loaded by the same `ModelSet` the model deployments use.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from models.decode_pool import ImageDecoder
from models.image_scoring import ImageScores, PreparedImage
from models.image_upload import ImageUpload, ScoredImage, decode_and_score
from models.model_set import ModelSet, wanted_entries
from models.registry import DEFAULT_REGISTRY
from models.tasks import TASKS
from models.text_scoring import TextRequest, TextScores
from policy.decisions import Decision, decide
from policy.types import ContentKind, Profile


class LocalBackends:
    def __init__(self, versions: dict[str, str], registry: Path = DEFAULT_REGISTRY):
        """`versions`: task -> registry version, as in a deployment's `user_config.models`."""
        self._models = ModelSet().loaded(wanted_entries({"models": versions}, TASKS, registry))
        self._image = self._models.image_scorer()
        self._text = self._models.text_scorer()
        self._decoder = ImageDecoder()

    async def score_upload(self, upload: ImageUpload) -> ScoredImage:
        return await decode_and_score(upload, self._decoder, self._image.prepare, self._score_prepared)

    async def _score_prepared(self, image: PreparedImage) -> ImageScores:
        return (await asyncio.to_thread(self._image.score_prepared, [image]))[0]

    async def score_text(self, request: TextRequest) -> TextScores:
        return (await asyncio.to_thread(self._text.score, [request]))[0]

    async def score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        return await asyncio.to_thread(self._text.score, requests)

    async def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        return [decide(scores, profile, kind, threshold) for scores, kind in items]

    async def model_versions(self) -> dict[str, str]:
        return dict(self._models.versions)
