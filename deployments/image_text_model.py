"""ImageTextModel: the image text reader (models/image_text.py) as a batched, autoscaled Ray Serve deployment.

The ImageModel, which decodes an upload, sends it the frames to read (the first at the reader's size, a few of an
animation's others) when the caller's profile enables `text_toxic`, and scores the image meanwhile: the bytes
travel once and are decoded once. Its own replicas, CPU share and queue (serve_config.yaml), so a burst of images
whose text is read never queues in front of the images that only the image models score.
"""

from __future__ import annotations

import asyncio
import time

from PIL import Image
from ray import serve

from deployments.batching import BatchSettings
from deployments.metrics import record_batch
from deployments.model_shell import ModelShell
from models.batch_isolation import scored_apart
from models.image_text import ImageTextReader, ReadText
from models.model_set import ModelSet
from models.tasks import IMAGE_TEXT_TASKS

# Reading is one image at a time (the detector's input size differs per image); a batch is the images that waited
# while the last one ran, read one after the other in the compute thread.
DEFAULT_BATCHING = BatchSettings(max_batch_size=4, batch_wait_timeout_s=0.0)


@serve.deployment(max_ongoing_requests=8)
class ImageTextModel(ModelShell):
    tasks = IMAGE_TEXT_TASKS
    default_batching = DEFAULT_BATCHING

    def scorer_of(self, models: ModelSet) -> ImageTextReader:
        return models.text_reader()

    async def read(self, frames: list[Image.Image]) -> ReadText:
        return await self._batched(frames)

    async def _score_batch(self, images: list[list[Image.Image]]) -> list[ReadText | Exception]:
        started = time.perf_counter()
        read = await asyncio.to_thread(scored_apart, self._scorer.read_many, images)
        record_batch("image_text", len(images), time.perf_counter() - started, self._batches.waiting)
        return read
