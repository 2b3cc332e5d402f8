"""The moderators' view of the queue: an account filter, and a moderator's accounts, read each account's own pending
index, and an operator's queue goes round the accounts, so one account's flood never hides another's items; items
queued before those indexes existed still show."""

from __future__ import annotations

import asyncio
import json
import time

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


async def _queue_as_before(redis_client, account: str, count: int, *, pending_ids: bool) -> list[int]:
    """Items as earlier releases wrote them: the counter's value as id and as score, no `seq`, no account among the
    accounts with pending items, and (before the last release) no pending-ids index."""
    ids = []
    for _ in range(count):
        item_id = await redis_client.incr(redis_keys.review_sequence())
        expire_at = int(time.time()) + 3600
        data = {"account": account, "reason": "model_flagged", "kind": "text", "created_at": time.time()}
        async with redis_client.pipeline(transaction=False) as pipe:
            pipe.hset(redis_keys.review_item(item_id), mapping={"data": json.dumps(data), "status": "pending"})
            pipe.expireat(redis_keys.review_item(item_id), expire_at)
            for index in (redis_keys.review_all(), redis_keys.review_by_status("pending"),
                          redis_keys.review_by_account(account)):  # fmt: skip
                pipe.zadd(index, {str(item_id): item_id})
            if pending_ids:
                pipe.zadd(redis_keys.review_pending_ids_of(account), {str(item_id): item_id})
            pipe.zadd(redis_keys.review_pending_of(account), {str(item_id): expire_at})
            pipe.zadd(redis_keys.review_expiring(), {f"{item_id}:{account}": expire_at})
            await pipe.execute()
        ids.append(item_id)
    return ids


async def test_items_queued_before_the_account_index_are_added_to_it_on_first_read(redis_client):
    """Also to the accounts an operator's queue goes round: by one walk of the pending index, 200 items a step. Their
    ids, the counter's, keep working beside the random ones, in the order they were queued."""
    old_a = await _queue_as_before(redis_client, "site-a", 450, pending_ids=False)  # three steps of the walk
    old_b = await _queue_as_before(redis_client, "site-b", 1, pending_ids=True)  # the last release's
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    new_a, new_c = *await _queue(queue, "site-a"), *await _queue(queue, "site-c")
    assert [item.id for item in await browser.pending(limit=4)] == [old_a[0], old_b[0], new_c, old_a[1]]
    assert [item.id for item in await browser.pending(QueueFilter(account="site-a"), limit=500)] == [*old_a, new_a]
    assert await redis_client.zcard(redis_keys.review_pending_ids_of("site-a")) == 451
    assert await redis_client.get(redis_keys.review_old_items_added()) == "done"
    await queue.decide(old_b[0], "approved")  # the decision leaves the indexes, and site-b has nothing left
    assert await redis_client.zcard(redis_keys.review_pending_ids_of("site-b")) == 0
    assert [item.id for item in await browser.pending(limit=3)] == [old_a[0], new_c, old_a[1]]
    assert (await queue.get(old_b[0], account="site-b")).status == "approved"  # the counter's ids keep working
    assert [item.id for item in await queue.list(status="approved")] == old_b
    assert [item.id for item in await queue.list(account="site-a", limit=2)] == [new_a, old_a[-1]]  # newest first


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


async def test_behind_one_accounts_flood_another_accounts_item_is_on_the_operators_first_page(redis_client):
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    await _flood(queue, "flood", FLOOD)
    later = await queue.create(account="site-b", reason="model_flagged", kind="image", reference=None, image_url=None,
                               scores={"nsfw": 0.6}, model_version="m")  # fmt: skip
    first_page = await browser.pending(limit=50)
    assert later.id in [item.id for item in first_page] and first_page[0].account == "flood"  # the oldest still first
    assert [item.id for item in await browser.pending(QueueFilter(kind="image"))] == [later.id]  # other filters too


async def test_the_operators_queue_goes_round_the_accounts_and_decide_and_next_goes_on_to_the_next_account(
    redis_client,
):
    """Each account's oldest item, then each one's second oldest...; within a round, the account whose oldest item
    waited longest first. "Next" after an item walks that order; after a decision, the next account's oldest."""
    queue, browser = ReviewQueue(redis_client), ReviewBrowser(redis_client)
    a1, a2, a3, b1, c1, b2 = [(await _queue(queue, account))[0] for account in "aaabcb"]
    everyone = QueueFilter()
    listed = [item.id for item in await browser.pending(everyone)]
    assert listed == [a1, b1, c1, a2, b2, a3]
    for earlier, later in zip(listed, listed[1:]):
        assert (await browser.next_after(earlier, everyone)).id == later
        assert (await browser.previous_before(later, everyone)).id == earlier
    decided = []
    item_id = a1
    while item_id is not None:
        await queue.decide(item_id, "approved")
        decided.append(item_id)
        following = await browser.next_after(item_id, everyone)
        item_id = following.id if following else None
    assert decided == [a1, b1, c1, a2, b2, a3]
