"""ImageModel: the image decoder and scorer as a batched, autoscaled Ray Serve deployment.

A thin shell: the models come from the registry through `ModelSet`, the scoring
(frames, categories, cost per request) lives in `models.image_scoring.ImageScorer`, the
bounded decoding in `models.decode_pool.ImageDecoder`. The ingress sends an upload's bytes
(`score_upload`); each request is decoded and prepared as the models' inputs in one of the decoder's workers (in
parallel with other requests), then waits in the batch, which runs only the networks.
"""

from __future__ import annotations

import asyncio
import time

from PIL import Image
from ray import serve
from ray.serve.handle import DeploymentHandle

from deployments.batching import BatchSettings
from deployments.metrics import record_batch, record_image_prepared
from deployments.model_shell import ModelShell
from models.image_decoding import ImageRefused
from models.decode_pool import ImageDecoder
from models.image_scoring import ImageRequest, ImageScorer, ImageScores, PreparedImage
from models.image_text import ReadText
from models.image_upload import ImageUpload, RefusedImage, ScoredImage, decode_and_score
from models.batch_isolation import scored_apart
from models.model_set import ModelSet
from models.tasks import IMAGE_TASKS

MAX_BATCH_SIZE = 8  # the defaults that user_config may override (ModelShell.default_batching)
BATCH_WAIT_S = 0.0
DEFAULT_BATCHING = BatchSettings(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)


@serve.deployment(max_ongoing_requests=16)
class ImageModel(ModelShell):
    tasks = IMAGE_TASKS
    default_batching = DEFAULT_BATCHING

    def __init__(self, model_registry: str, text_reader: DeploymentHandle | None = None):
        """`text_reader`: the ImageTextModel, which reads the words on the images whose profile enables
        `text_toxic` (None: such an image fails as a 503, models/image_upload.py NoTextReader)."""
        super().__init__(model_registry)
        self._scorer: ImageScorer | None = None
        self._decoder = ImageDecoder()
        # By reference: a 960 px frame and two more are 2-4 MB, near the 4 MiB cap of a message between replicas.
        self._text_reader = text_reader.options(_by_reference=True) if text_reader is not None else None

    def scorer_of(self, models: ModelSet) -> ImageScorer:
        return models.image_scorer()

    async def score_upload(self, upload: ImageUpload) -> ScoredImage | RefusedImage:
        """Decode and prepare (concurrently with other requests, bounded), then score in a batch with them."""
        started = time.perf_counter()

        async def scored(image: PreparedImage) -> ImageScores:
            record_image_prepared(time.perf_counter() - started)
            return await self._batched(image)

        read = self._read if self._text_reader is not None else None
        try:
            return await decode_and_score(upload, self._decoder, self._prepare, scored, read)
        except ImageRefused as refusal:
            return RefusedImage(refusal)

    async def model_versions(self) -> dict[str, str]:
        """Its own models' versions and its text reader's: a reader that is down fails the images read for text, so
        the health check must see it."""
        own = super().model_versions()
        if self._text_reader is None:
            return own
        return {**own, **await self._text_reader.model_versions.remote()}

    async def _read(self, frames: list[Image.Image]) -> ReadText:
        return await self._text_reader.read.remote(frames)

    def _prepare(self, request: ImageRequest) -> PreparedImage:
        # A category the profile enables but this deployment does not serve fails that request here (a 503 to its
        # client), never an answer that skips it, and never another request.
        return self._scorer.prepare(request)

    async def _score_batch(self, images: list[PreparedImage]) -> list[ImageScores | Exception]:
        # One request's failure never fails the others of its batch (scored_apart).
        started = time.perf_counter()
        scores = await asyncio.to_thread(scored_apart, self._scorer.score_prepared, images)
        record_batch("image", len(images), time.perf_counter() - started, self._batches.waiting)
        return scores
