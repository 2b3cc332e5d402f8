"""Model backends in this process: the real models without Ray.

For the API tests, benchmarks and tools; under Ray Serve the ingress uses
`deployments.handles.ServeBackends` instead. Models come from the same registry.
"""

from __future__ import annotations

import asyncio

from models.image_scoring import ImageRequest, ImageScorer, ImageScores
from models.registry import find_entry, load_model
from policy.decisions import Decision, decide
from policy.types import ContentKind, Profile
from serve_app.backends import TextScores


class LocalBackends:
    def __init__(self, image_versions: dict[str, str], text_version: str):
        categories = {task.split(".", 1)[1]: version for task, version in image_versions.items()}
        self._image = ImageScorer(
            models={c: load_model(find_entry(f"image.{c}", v)) for c, v in categories.items()},
            versions=categories,
        )
        self._text = load_model(find_entry("text.toxic", text_version))
        self._versions = {**image_versions, "text.toxic": text_version}

    async def score_image(self, request: ImageRequest) -> ImageScores:
        return (await asyncio.to_thread(self._image.score, [request]))[0]

    async def score_text(self, text: str) -> TextScores:
        (result,) = await asyncio.to_thread(self._text.predict, [text])
        return TextScores(categories={"toxic": result["toxic"]}, model_version=self._versions["text.toxic"])

    async def decide(
        self, scores: dict[str, float], profile: Profile, kind: ContentKind, threshold: float | None
    ) -> Decision:
        return decide(scores, profile, kind, threshold)

    async def model_versions(self) -> dict[str, str]:
        return dict(self._versions)
