"""ImageModel: the image scorer as a batched, autoscaled Ray Serve deployment.

A thin shell: the models come from the registry through `ModelSet`, the scoring
(frames, categories, cost per request) lives in `models.image_scoring.ImageScorer`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ray import serve

from deployments.threads import limit_compute_threads
from models.image_scoring import ImageRequest, ImageScorer, ImageScores
from models.model_set import ModelSet, wanted_entries
from models.tasks import IMAGE_TASKS

# serve_config.yaml keeps max_ongoing_requests at or above the batch size, or batches are capped.
MAX_BATCH_SIZE = 8
# Short: under load batches fill from the queue anyway; an idle request should not wait.
BATCH_WAIT_S = 0.001


@serve.deployment(max_ongoing_requests=16)
class ImageModel:
    def __init__(self, model_registry: str):
        limit_compute_threads()
        self._registry = Path(model_registry)
        self._models = ModelSet()
        self._scorer: ImageScorer | None = None

    async def reconfigure(self, user_config: dict) -> None:
        models = await self._models.swapped_to(wanted_entries(user_config, IMAGE_TASKS, self._registry))
        # One assignment: a batch in flight keeps the scorer it started with.
        self._models, self._scorer = models, models.image_scorer()

    @serve.batch(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
    async def score(self, requests: list[ImageRequest]) -> list[ImageScores]:
        # A category the profile enables but this deployment does not serve fails the batch
        # (a 503 to the client), never an answer that skips it.
        return await asyncio.to_thread(self._scorer.score, requests)

    def model_versions(self) -> dict[str, str]:
        if self._scorer is None:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)
