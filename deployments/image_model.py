"""ImageModel: the image scorer as a batched, autoscaled Ray Serve deployment.

A thin shell: the models come from the registry through `ModelSet`, the scoring
(frames, categories, cost per request) lives in `models.image_scoring.ImageScorer`.
"""

from __future__ import annotations

import asyncio

from ray import serve

from deployments.model_swap import ModelSet, wanted_entries
from deployments.threads import limit_compute_threads
from serve_app.settings import get_settings
from models.image_scoring import ImageRequest, ImageScorer, ImageScores

# serve_config.yaml keeps max_ongoing_requests at or above the batch size, or batches are capped.
MAX_BATCH_SIZE = 8
# Short: under load batches fill from the queue anyway; an idle request should not wait.
BATCH_WAIT_S = 0.001
TASKS = ("image.nsfw", "image.weapon", "image.violence")


@serve.deployment(max_ongoing_requests=16)
class ImageModel:
    def __init__(self):
        limit_compute_threads()
        self._models = ModelSet()
        self._scorer: ImageScorer | None = None
        self._categories: frozenset[str] = frozenset()

    async def reconfigure(self, user_config: dict) -> None:
        models = await self._models.swapped_to(
            wanted_entries(user_config, TASKS, get_settings().model_registry)
        )
        scorer = ImageScorer(
            models={_category(task): model for task, model in models.models.items()},
            versions={_category(task): version for task, version in models.versions.items()},
        )
        # One assignment: a batch in flight keeps the scorer it started with.
        self._models, self._scorer, self._categories = models, scorer, frozenset(scorer_categories(models))

    @serve.batch(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
    async def score(self, requests: list[ImageRequest]) -> list[ImageScores]:
        scorer, available = self._scorer, self._categories
        # A category the profile enables but this deployment does not serve is left out.
        served = [ImageRequest(r.frames, tuple(c for c in r.categories if c in available)) for r in requests]
        return await asyncio.to_thread(scorer.score, served)

    def model_versions(self) -> dict[str, str]:
        if self._scorer is None:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)


def _category(task: str) -> str:
    return task.split(".", 1)[1]


def scorer_categories(models: ModelSet) -> list[str]:
    return [_category(task) for task in models.models]
