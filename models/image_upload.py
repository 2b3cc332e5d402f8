"""An uploaded image on its way to the image models: its bytes travel, and it is decoded where it is scored.

Why decode on the model side: an upload is tens of KB, its decoded frames up to a few MB each; pickling frames from
the ingress to an ImageModel replica cost 9-15 ms a request, and decoding in the single ingress made that replica
the graph's bottleneck. So the ingress (after taking the quota unit) sends the bytes, and the replica decodes them
with the same bounded decoder (``models.decode_pool.ImageDecoder``) before scoring.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from models.image_decoding import ImageRefused
from models.decode_pool import ImageDecoder
from models.image_scoring import ImageRequest, ImageScores
from models.pdq import PdqHash, pdq_of_image


@dataclass(frozen=True)
class ImageUpload:
    data: bytes  # the upload as received, never decoded before the quota unit is taken
    max_pixels: int  # the caller's plan's limit per frame
    categories: tuple[str, ...]  # enabled categories; always includes "nsfw"


@dataclass(frozen=True)
class ScoredImage:
    """The models' scores, with what the access log notes of the decoded image."""

    scores: ImageScores
    format: str
    width: int
    height: int
    pdq: PdqHash | None = None  # of the first decoded frame: what the hash bank matches (store/hash_bank/bank.py)

    @property
    def categories(self) -> dict[str, float]:
        return self.scores.categories

    @property
    def safe(self) -> float:
        return self.scores.safe

    @property
    def model_version(self) -> str:
        return self.scores.model_version


@dataclass(frozen=True)
class RefusedImage:
    """An upload the decoder refused, returned as a value across Ray: a raised exception would come back
    wrapped in Ray's own error type, and the ingress must answer with the refusal's own status."""

    refusal: ImageRefused


async def decode_and_score(
    upload: ImageUpload, decoder: ImageDecoder, score: Callable[[ImageRequest], Awaitable[ImageScores]]
) -> ScoredImage:
    """Decode (bounded: raises the decoder's ImageRefused errors), then `score` the frames and, meanwhile in a
    thread, hash the first one (PDQ, a few ms on a 512 px frame)."""
    image = await decoder.decode(upload.data, upload.max_pixels)
    scores, pdq = await asyncio.gather(
        score(ImageRequest(frames=image.frames, categories=upload.categories)),
        asyncio.to_thread(pdq_of_image, image.frames[0]),
    )
    return ScoredImage(scores=scores, format=image.format, width=image.width, height=image.height, pdq=pdq)


def unwrapped(outcome: ScoredImage | RefusedImage) -> ScoredImage:
    """The scored image, or the refusal raised again on this side."""
    if isinstance(outcome, RefusedImage):
        raise outcome.refusal
    return outcome
