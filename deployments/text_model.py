"""TextModel: the text scorer as a batched, autoscaled Ray Serve deployment.

A thin shell: the model comes from the registry through `ModelSet`, the scoring lives
in `models.text_scoring.TextScorer`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ray import serve

from deployments.threads import limit_compute_threads
from models.model_set import ModelSet, wanted_entries
from models.tasks import TEXT_TASKS
from models.text_scoring import TextRequest, TextScorer, TextScores

# serve_config.yaml keeps max_ongoing_requests at or above the batch size, or batches are capped.
MAX_BATCH_SIZE = 16
# Short: under load batches fill from the queue anyway; an idle request should not wait.
BATCH_WAIT_S = 0.001


@serve.deployment(max_ongoing_requests=16)
class TextModel:
    def __init__(self, model_registry: str):
        limit_compute_threads()
        self._registry = Path(model_registry)
        self._models = ModelSet()
        self._scorer: TextScorer | None = None

    async def reconfigure(self, user_config: dict) -> None:
        models = await self._models.swapped_to(wanted_entries(user_config, TEXT_TASKS, self._registry))
        # One assignment: a batch in flight keeps the scorer it started with.
        self._models, self._scorer = models, models.text_scorer()

    @serve.batch(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
    async def score(self, requests: list[TextRequest]) -> list[TextScores]:
        return await asyncio.to_thread(self._scorer.score, requests)

    def model_versions(self) -> dict[str, str]:
        if self._scorer is None:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)
