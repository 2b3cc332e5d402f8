"""TextModel: the text toxicity model as a batched, autoscaled Ray Serve deployment."""

from __future__ import annotations

import asyncio

from ray import serve

from deployments.model_swap import ModelSet, wanted_entries
from deployments.threads import limit_compute_threads
from serve_app.settings import get_settings
from serve_app.backends import TextScores

# serve_config.yaml keeps max_ongoing_requests at or above the batch size, or batches are capped.
MAX_BATCH_SIZE = 16
# Short: under load batches fill from the queue anyway; an idle request should not wait.
BATCH_WAIT_S = 0.001
TASKS = ("text.toxic",)


@serve.deployment(max_ongoing_requests=16)
class TextModel:
    def __init__(self):
        limit_compute_threads()
        self._models = ModelSet()

    async def reconfigure(self, user_config: dict) -> None:
        self._models = await self._models.swapped_to(
            wanted_entries(user_config, TASKS, get_settings().model_registry)
        )

    @serve.batch(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
    async def score(self, texts: list[str]) -> list[TextScores]:
        models = self._models  # a swap mid-batch must not mix versions
        results = await asyncio.to_thread(models.models["text.toxic"].predict, texts)
        version = models.versions["text.toxic"]
        return [TextScores(categories={"toxic": r["toxic"]}, model_version=version) for r in results]

    def model_versions(self) -> dict[str, str]:
        if not self._models.versions:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)
