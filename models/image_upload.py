"""An uploaded image on its way to the image models: its bytes travel, and it is decoded where it is scored. The home
of an upload's limits, every part named here:

- The numbers: the plan's bytes and pixels per frame, policy/types.py `Plan.image_max_bytes` (at most
  `MAX_IMAGE_BYTES`) and `Plan.image_max_pixels`, seeded from config/plans.yaml; and the decoding budget whatever the
  plan, models/image_decoding.py `MAX_TOTAL_PIXELS` (over the frames walked), `MAX_SCAN_FRAMES` and `MAX_FRAMES`.
- The bytes, in the ingress as they arrive: a form's part by serve_app/bodies.py `read_image_form` (declared or
  streamed; serve_app/form_reader.py `read_form` cuts the part, and the whole body at the part plus
  `FORM_OVERHEAD_BYTES`, with `PartTooLarge`), an OpenAI data: URL by serve_app/routes_openai.py `_image_bytes` (its
  JSON body capped by `body_limit`); both raise serve_app/bodies.py `image_too_large`, a moderation/errors.py
  `UploadTooLarge`.
- The pixels, on the model side: moderation/items.py `image_item` puts the plan's in the `ImageUpload` below
  (`max_pixels`); models/image_decoding.py `decode_image` checks each frame's header against them before its pixels
  are decoded (GIF and TIFF by `_walk_structure`, before Pillow opens the file), raising `ImageTooLarge`.
- The answer to either: 413 `image_too_large` (serve_app/errors.py `_IMAGE_TOO_LARGE`).

Decoding and the models' own image work (resizing, cropping, normalising: ``ImageScorer.prepare``) run together in
one of the decoder's workers, per request and in parallel across requests; the batch that follows runs only the
networks, so a batch fills under load instead of each request arriving at it one by one.

Why decode on the model side: an upload is tens of KB, its decoded frames up to a few MB each; pickling frames from
the ingress to an ImageModel replica cost 9-15 ms a request, and decoding in the single ingress made that replica
the graph's bottleneck. So the ingress (after taking the quota unit) sends the bytes, and the replica decodes them
with the same bounded decoder (``models.decode_pool.ImageDecoder``) before scoring.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from PIL import Image

from models.image_decoding import DecodedImage, ImageRefused
from models.decode_pool import ImageDecoder
from models.image_scoring import ImageRequest, ImageScores
from models.image_text import MAX_TEXT_FRAMES, TEXT_FRAME_SIDE_PX, TEXT_TOXIC, ReadText
from models.pdq import PdqHash, pdq_of_image

Prepared = TypeVar("Prepared")  # what the model side makes of a request's frames (ImageScorer.prepare)


@dataclass(frozen=True)
class ImageUpload:
    data: bytes  # the upload as received, never decoded before the quota unit is taken
    max_pixels: int  # the caller's plan's limit per frame
    categories: tuple[str, ...]  # enabled categories of the image models; always includes "nsfw"
    # Whether the words written on it are read (the profile enables `text_toxic`): then its first frame is also
    # decoded at TEXT_FRAME_SIDE_PX, and the text reader reads it.
    read_text: bool = False


class NoTextReader(RuntimeError):
    """The upload asks for its text read and this deployment has no text reader: its request fails (a 503), never
    an answer that skips the category."""


@dataclass(frozen=True)
class ScoredImage:
    """The models' scores, with what the access log notes of the decoded image, and what was read on it."""

    scores: ImageScores
    format: str
    width: int
    height: int
    pdq: PdqHash | None = None  # of the first decoded frame: what the hash bank matches (store/hash_bank/bank.py)
    read: ReadText | None = None  # when the upload asked for its text read
    # What moderation/flow.py adds when something was read: the text model's scores of it (OpenAI's mapping reads
    # them), that model's version, and `text_toxic`, the text's strictest category on text_toxic's thresholds
    # (policy/decisions.py `strictest_text_score`). None: nothing read, and `text_toxic` is 0.
    read_scores: dict[str, float] | None = None
    read_scored_by: str | None = None
    read_score: float | None = None

    @property
    def categories(self) -> dict[str, float]:
        if self.read is None:
            return self.scores.categories
        return {**self.scores.categories, TEXT_TOXIC: self.read_score or 0.0}

    @property
    def safe(self) -> float:
        return self.scores.safe

    @property
    def model_version(self) -> str:
        if self.read is None:
            return self.scores.model_version
        scored_by = f"+{self.read_scored_by}" if self.read_scored_by else ""
        return f"{self.scores.model_version};{TEXT_TOXIC}={self.read.version}{scored_by}"


@dataclass(frozen=True)
class RefusedImage:
    """An upload the decoder refused, returned as a value across Ray: a raised exception would come back
    wrapped in Ray's own error type, and the ingress must answer with the refusal's own status."""

    refusal: ImageRefused


async def decode_and_score(
    upload: ImageUpload,
    decoder: ImageDecoder,
    prepare: Callable[[ImageRequest], Prepared],
    score: Callable[[Prepared], Awaitable[ImageScores]],
    read: Callable[[list[Image.Image]], Awaitable[ReadText]] | None = None,
) -> ScoredImage:
    """Decode and `prepare` the frames as the models' inputs, in one of the decoder's workers (bounded: raises the
    decoder's ImageRefused errors), then `score` them (in a batch with other requests) and, meanwhile in a thread,
    hash the first frame (PDQ, a few ms on a 512 px frame); and `read` the words on it when the upload asks, at the
    same time (raises NoTextReader when it asks and there is no `read`)."""
    if upload.read_text and read is None:
        raise NoTextReader("this image deployment has no text reader (ImageTextModel)")
    image, prepared = await decoder.decode_then(
        upload.data, upload.max_pixels, lambda image: prepare(ImageRequest(image.frames, upload.categories)),
        TEXT_FRAME_SIDE_PX if upload.read_text else None,
    )
    calls = [score(prepared), asyncio.to_thread(pdq_of_image, image.frames[0])]
    if upload.read_text:
        calls.append(read(text_frames(image)))
    scores, pdq, *was_read = await asyncio.gather(*calls)
    return ScoredImage(scores=scores, format=image.format, width=image.width, height=image.height, pdq=pdq,
                       read=was_read[0] if was_read else None)  # fmt: skip


def text_frames(image: DecodedImage) -> list[Image.Image]:
    """The frames the text reader reads: the first at its own size, then of an animation's other frames (already
    decoded, 512 px) the last and those evenly between, MAX_TEXT_FRAMES in all."""
    later = image.frames[1:]
    if len(later) >= MAX_TEXT_FRAMES:
        step = len(later) / (MAX_TEXT_FRAMES - 1)
        later = [later[min(len(later) - 1, round((index + 1) * step) - 1)] for index in range(MAX_TEXT_FRAMES - 1)]
    first = image.text_frame if image.text_frame is not None else image.frames[0]
    return [first, *later]


def unwrapped(outcome: ScoredImage | RefusedImage) -> ScoredImage:
    """The scored image, or the refusal raised again on this side."""
    if isinstance(outcome, RefusedImage):
        raise outcome.refusal
    return outcome
