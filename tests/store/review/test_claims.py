"""A moderator's claim on a review item: one holder at a time, renewed by its holder, freed by time or decision."""

from __future__ import annotations

import asyncio

import pytest

from store import redis_keys
from store.review.claims import Claims

pytestmark = pytest.mark.anyio


async def test_two_moderators_opening_an_item_at_once_never_both_hold_it(redis_client):
    claims = Claims(redis_client)
    for item_id in range(1, 31):
        results = await asyncio.gather(*(claims.claim(item_id, name) for name in ("mia", "noor", "ola")))
        holders = {result.holder for result in results}
        assert len(holders) == 1 and await claims.holder(item_id) in holders


async def test_the_holder_renews_others_see_the_holder_and_a_release_frees_it(redis_client):
    claims = Claims(redis_client, claim_s=120)
    assert (await claims.claim(7, "mia")).holder == "mia"
    taken = await claims.claim(7, "noor")
    assert taken.holder == "mia" and 0 < taken.seconds_left <= 120
    await claims.release(7, "noor")  # not hers to free
    assert await claims.holders([7, 8]) == {7: "mia"}
    await claims.release(7, "mia")
    assert (await claims.claim(7, "noor")).holder == "noor"


async def test_a_claim_expires_by_itself(redis_client):
    claims = Claims(redis_client, claim_s=1)
    await claims.claim(9, "mia")
    assert 0 < await redis_client.ttl(redis_keys.review_claim(9)) <= 1
    await asyncio.sleep(1.2)
    assert (await claims.claim(9, "noor")).holder == "noor"
