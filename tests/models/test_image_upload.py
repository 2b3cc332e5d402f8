"""An upload's refusals cross Ray as values: each must come back whole after a pickle, and raise again."""

from __future__ import annotations

import asyncio
import io
import pickle

import pytest

from models.image_decoding import DecodeTimeout, ImageRefused, ImageTooLarge, InvalidImage
from models.decode_pool import DecodeBusy, ImageDecoder
from models.image_scoring import ImageRequest, ImageScores
from models.image_upload import ImageUpload, RefusedImage, ScoredImage, decode_and_score, unwrapped
from PIL import Image


def png_bytes(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (120, 80, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "refusal",
    [
        InvalidImage("not a JPEG, PNG, WebP, GIF, BMP or TIFF image"),
        ImageTooLarge(49_000_000, 40_000_000),
        ImageTooLarge(None, 40_000_000),
        DecodeTimeout("image decoding took more than 3.0 s"),
        DecodeBusy("64 image decodes in flight; the limit is reached", retry_after_s=2),
    ],
    ids=lambda refusal: type(refusal).__name__,
)
def test_a_refusal_survives_the_pickle_and_is_raised_again(refusal):
    carried = pickle.loads(pickle.dumps(RefusedImage(refusal)))
    with pytest.raises(type(refusal)) as raised:
        unwrapped(carried)
    assert isinstance(raised.value, ImageRefused)
    assert str(raised.value) == str(refusal) and vars(raised.value) == vars(refusal)


def test_an_upload_is_decoded_then_scored_with_its_categories():
    seen: list[ImageRequest] = []

    async def score(request: ImageRequest) -> ImageScores:
        seen.append(request)
        return ImageScores(categories={"nsfw": 0.1, "weapon": 0.2}, safe=0.9, model_version="v")

    upload = ImageUpload(data=png_bytes(64, 48), max_pixels=10_000, categories=("nsfw", "weapon"))
    scored = asyncio.run(decode_and_score(upload, ImageDecoder(), lambda request: request, score))
    assert isinstance(scored, ScoredImage) and unwrapped(scored) is scored
    assert (scored.format, scored.width, scored.height) == ("PNG", 64, 48)
    assert (scored.categories, scored.safe, scored.model_version) == ({"nsfw": 0.1, "weapon": 0.2}, 0.9, "v")
    assert len(seen) == 1 and seen[0].categories == ("nsfw", "weapon") and seen[0].frames[0].size[0] > 0


def test_a_refused_upload_is_never_scored():
    async def score(request: ImageRequest) -> ImageScores:
        raise AssertionError("a refused upload reached the model")

    too_many_pixels = ImageUpload(data=png_bytes(200, 200), max_pixels=10_000, categories=("nsfw",))
    with pytest.raises(ImageTooLarge):
        asyncio.run(decode_and_score(too_many_pixels, ImageDecoder(), lambda request: request, score))
