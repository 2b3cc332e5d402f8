"""Model backends in this process: the real models without Ray.

For the API tests, benchmarks and tools; under Ray Serve the ingress uses
`deployments.handles.ServeBackends` instead. Models come from the same registry and
are loaded by the same `ModelSet` the model deployments use. Under the text cascade, its second stage runs here
too, batched across requests by the same BatchQueue as in its deployment, and so does the image text reader when
`versions` names one (`image.text`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from models.decode_pool import ImageDecoder
from models.image_scoring import ImageScores, PreparedImage
from models.image_text import ReadText
from models.batch_isolation import raised_if_failed, scored_apart
from models.batch_queue import BatchQueue
from models.text_cascade_completion import CascadeCompletion
from models.image_upload import ImageUpload, ScoredImage, decode_and_score
from models.model_set import ModelSet, wanted_entries
from models.registry import DEFAULT_REGISTRY
from models.tasks import SECOND_STAGE_TASKS, TASKS
from models.text_cascade import SecondStageAnswer, SecondStageItem
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
        (second_stage_task,) = SECOND_STAGE_TASKS
        self._second_stage = self._models.models.get(second_stage_task)
        self._second_stage_batches = BatchQueue(self._second_stage_batch, 16, 0.0)
        self._completion = CascadeCompletion(self._ask_second_stage if self._second_stage else None)
        self._text_reader = self._models.text_reader()
        self._reads = BatchQueue(self._read_batch, 4, 0.0)  # one read at a time, as in ImageTextModel

    async def score_upload(self, upload: ImageUpload) -> ScoredImage:
        read = self._read if self._text_reader is not None else None
        return await decode_and_score(upload, self._decoder, self._image.prepare, self._score_prepared, read)

    async def _read(self, frames) -> ReadText:
        return raised_if_failed(await self._reads.submit(frames))

    async def _read_batch(self, images: list) -> list:
        return await asyncio.to_thread(scored_apart, self._text_reader.read_many, images)

    async def _score_prepared(self, image: PreparedImage) -> ImageScores:
        return (await asyncio.to_thread(self._image.score_prepared, [image]))[0]

    async def score_text(self, request: TextRequest) -> TextScores:
        return (await self.score_texts([request]))[0]

    async def score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        scores = await asyncio.to_thread(self._text.score, requests)
        return await self._completion.complete(scores, self._text.second_stage_tag, [r.answer_by for r in requests])

    async def _ask_second_stage(self, item: SecondStageItem) -> SecondStageAnswer:
        return raised_if_failed(await self._second_stage_batches.submit(item))

    async def _second_stage_batch(self, items: list[SecondStageItem]) -> list:
        return await asyncio.to_thread(scored_apart, self._second_stage.score, items)

    async def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        return [decide(scores, profile, kind, threshold) for scores, kind in items]

    async def model_versions(self) -> dict[str, str]:
        # As under Serve, where the health check never asks the second stage: the cascade's version names its blend.
        return {task: version for task, version in self._models.versions.items() if task not in SECOND_STAGE_TASKS}
