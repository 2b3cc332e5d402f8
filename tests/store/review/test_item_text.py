"""A text review item keeps its text's start for the moderator, bounded, with the whole text's length."""

from __future__ import annotations

import pytest

from store.review.queue import ReviewQueue
from policy.types import MAX_REVIEW_TEXT_CHARS

pytestmark = pytest.mark.anyio


async def test_a_kept_text_is_cut_to_its_start_and_says_how_long_it_was(redis_client):
    queue = ReviewQueue(redis_client)
    long_text = "word " * 2000
    item = await queue.create(account="acme", reason="model_flagged", kind="text", reference="c-1", image_url=None,
                              scores={"toxic": 0.6}, model_version="m", text=long_text)  # fmt: skip
    stored = await queue.get(item.id)
    assert stored.text == long_text[:MAX_REVIEW_TEXT_CHARS] and stored.text_chars == len(long_text)
    image = await queue.create(account="acme", reason="model_flagged", kind="image", reference=None, image_url=None,
                               scores={"nsfw": 0.6}, model_version="m")  # fmt: skip
    assert (await queue.get(image.id)).text is None
