"""The moderators' view of the queue: an account filter, and a moderator's accounts, read each account's own pending
index, so one account's flood never hides another's items; items queued before that index existed still show."""

from __future__ import annotations

import asyncio

import pytest

from store import redis_keys
from store.review.browse import MAX_SCANNED, QueueFilter, ReviewBrowser
from store.review.queue import ReviewQueue

pytestmark = pytest.mark.anyio
FLOOD = 6_000


async def _queue(queue: ReviewQueue, account: str, count: int = 1) -> list[int]:
    ids = []
    for n in range(count):
        item = await queue.create(account=account, reason="model_flagged", kind="text", reference=f"r{n}",
                                  image_url=None, scores={"toxic": 0.6}, model_version="m")  # fmt: skip
        ids.append(item.id)
    return ids


async def _flood(queue: ReviewQueue, account: str, count: int) -> None:
    for start in range(0, count, 50):
        await asyncio.gather(*(_queue(queue, account) for _ in range(start, min(count, start + 50))))


async def test_behind_one_accounts_flood_another_accounts_items_still_show(redis_client):
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    await _flood(queue, "flood", FLOOD)
    assert FLOOD > MAX_SCANNED
    later = await _queue(queue, "site-b", 2)
    shown = await browser.pending(QueueFilter(account="site-b"))
    assert [item.id for item in shown][-2:] == later and all(item.account == "site-b" for item in shown)
    scoped = await browser.pending(QueueFilter(scope=frozenset({"site-b"})))
    assert [item.id for item in scoped] == [item.id for item in shown]
    following = await browser.next_after(shown[0].id, QueueFilter(account="site-b"))
    assert following is not None and following.id == shown[1].id


async def test_items_queued_before_the_account_index_are_added_to_it_on_first_read(redis_client):
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    old = await _queue(queue, "site-a", 3)
    await redis_client.delete(redis_keys.review_pending_ids_of("site-a"))  # as a store written by the last release
    assert [item.id for item in await browser.pending(QueueFilter(account="site-a"))] == old
    assert await redis_client.zcard(redis_keys.review_pending_ids_of("site-a")) == 3
    await queue.decide(old[0], "approved")
    assert await redis_client.zcard(redis_keys.review_pending_ids_of("site-a")) == 2  # the decision leaves it


async def test_a_scope_of_several_accounts_merges_their_queues_oldest_first_and_an_empty_one_shows_nothing(
    redis_client,
):
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    a1, b1, c1, a2 = (*await _queue(queue, "a"), *await _queue(queue, "b"), *await _queue(queue, "c"),
                      *await _queue(queue, "a"))  # fmt: skip
    scope = frozenset({"a", "b"})
    assert [item.id for item in await browser.pending(QueueFilter(scope=scope))] == [a1, b1, a2]
    assert await browser.pending(QueueFilter(account="c", scope=scope)) == []  # outside the scope
    assert await browser.pending(QueueFilter(scope=frozenset())) == []
    assert (await browser.previous_before(a2, QueueFilter(scope=scope))).id == b1
    assert (await browser.next_after(b1, QueueFilter(scope=scope))).id == a2
