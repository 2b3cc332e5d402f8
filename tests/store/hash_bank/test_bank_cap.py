"""An account's bank holds at most `max_entries` hashes, checked in the step that adds: an import past it adds
nothing, racing imports never pass it, and a rejection past it is not banked while the decision stands."""

from __future__ import annotations

import asyncio
import logging

import pytest

from store import redis_keys
from store.hash_bank.bank import BankFull, HashBank
from store.review.queue import ReviewQueue, ReviewRules

pytestmark = pytest.mark.anyio


def _hashes(count: int, start: int = 0) -> list[tuple[str, None]]:
    return [(f"{n:064x}", None) for n in range(start, start + count)]


async def test_an_import_past_the_cap_adds_nothing_and_one_within_it_adds_its_new_hashes(redis_client):
    bank = HashBank(redis_client, max_entries=3)
    assert await bank.add_many("acme", _hashes(2), keep_existing=True) == 2
    version = await bank.version("acme")
    with pytest.raises(BankFull) as full:
        await bank.add_many("acme", _hashes(2, start=2), keep_existing=True)
    assert (full.value.count, full.value.max_entries, full.value.new, full.value.added) == (2, 3, 2, 0)
    assert await bank.count("acme") == 2 and await bank.version("acme") == version  # nothing written
    # Hashes already banked take no room, nor does a hash repeated: two known and one new, twice, fit one place.
    assert await bank.add_many("acme", _hashes(3) + _hashes(1, start=2), keep_existing=True) == 1
    assert await bank.count("acme") == 3
    assert await HashBank(redis_client, max_entries=3).add_many("other-co", _hashes(3)) == 3  # per account


async def test_racing_imports_never_take_a_bank_past_its_cap(redis_client):
    bank = HashBank(redis_client, max_entries=5)
    outcomes = await asyncio.gather(
        *(bank.add_many("acme", _hashes(1, start=n)) for n in range(20)), return_exceptions=True
    )
    assert sum(outcome == 1 for outcome in outcomes) == 5
    assert sum(isinstance(outcome, BankFull) for outcome in outcomes) == 15
    assert await bank.count("acme") == 5


async def _image_item(queue: ReviewQueue, pdq: str) -> int:
    item = await queue.create(account="acme", reason="model_flagged", kind="image", reference=None, image_url=None,
                              scores={"nsfw": 0.7}, model_version="nsfw-1", pdq=pdq)  # fmt: skip
    return item.id


async def test_a_rejection_past_the_cap_is_not_banked_but_counted_and_logged_and_the_decision_stands(
    redis_client, caplog
):
    queue = ReviewQueue(redis_client, ReviewRules(hash_bank_max_entries=1))
    first, second, again = "aa" * 32, "bb" * 32, "aa" * 32
    ids = [await _image_item(queue, pdq) for pdq in (first, second, again)]
    await queue.decide(ids[0], "rejected")
    with caplog.at_level(logging.WARNING, logger="moderation.review"):
        decided = await queue.decide(ids[1], "rejected")
    assert decided.status == "rejected" and (await queue.get(ids[1])).status == "rejected"
    bank = HashBank(redis_client)
    assert [entry.hash for entry in await bank.entries("acme")] == [first]
    assert await bank.skipped("acme") == 1
    assert f"rejected item {ids[1]} was not banked" in caplog.text
    # A hash already banked is renewed at the cap, not skipped.
    await queue.decide(ids[2], "rejected")
    assert [entry.review_id for entry in await bank.entries("acme")] == [ids[2]]
    assert await bank.skipped("acme") == 1
    assert await redis_client.get(redis_keys.hash_bank_skipped("other-co")) is None
