"""The review queue and content reports."""

from __future__ import annotations

import asyncio
import time

import pytest

from policy.review_queue import ReviewAlreadyDecided, ReviewItemNotFound, ReviewQueue

pytestmark = pytest.mark.anyio


async def _flagged(queue: ReviewQueue, account: str = "acme", reference: str | None = "img-1"):
    return await queue.create(
        account=account,
        reason="model_flagged",
        kind="image",
        reference=reference,
        image_url="https://cdn.example/img-1.jpg",
        scores={"nsfw": 0.7123456789012345, "safe": 0.2876543210987655},
        model_version="opennsfw2-1.0",
    )


async def test_a_created_item_is_pending_and_reads_back_as_created(redis_client):
    queue = ReviewQueue(redis_client)
    before = time.time()
    item = await _flagged(queue)
    assert item.status == "pending" and item.decided_at is None
    assert before <= item.created_at <= time.time()
    assert await queue.get(item.id) == item


async def test_item_ids_come_from_one_counter_and_never_repeat(redis_client):
    queue = ReviewQueue(redis_client)
    items = await asyncio.gather(*(_flagged(queue) for _ in range(20)))
    assert sorted(item.id for item in items) == list(range(1, 21))


async def test_an_unknown_item_is_none(redis_client):
    assert await ReviewQueue(redis_client).get(12345) is None


async def test_review_item_of_another_account_is_invisible(redis_client):
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue, account="acme")
    assert await queue.get(item.id, account="other") is None
    assert await queue.get(item.id, account="acme") == item
    assert await queue.list(account="other") == []


async def test_deciding_sets_the_status_and_the_decision_time(redis_client):
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue)
    decided = await queue.decide(item.id, "rejected")
    assert decided.status == "rejected"
    assert decided.decided_at >= item.created_at
    assert await queue.get(item.id) == decided


async def test_deciding_a_decided_item_fails(redis_client):
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue)
    await queue.decide(item.id, "approved")
    with pytest.raises(ReviewAlreadyDecided):
        await queue.decide(item.id, "rejected")
    assert (await queue.get(item.id)).status == "approved"


async def test_only_one_of_concurrent_decisions_wins(redis_client):
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue)
    outcomes = await asyncio.gather(
        *(queue.decide(item.id, "approved") for _ in range(10)), return_exceptions=True
    )
    assert sum(not isinstance(o, Exception) for o in outcomes) == 1
    assert all(isinstance(o, ReviewAlreadyDecided) for o in outcomes if isinstance(o, Exception))


async def test_deciding_an_unknown_item_fails(redis_client):
    with pytest.raises(ReviewItemNotFound):
        await ReviewQueue(redis_client).decide(999, "approved")


async def test_a_decision_is_approved_or_rejected_only(redis_client):
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue)
    with pytest.raises(ValueError):
        await queue.decide(item.id, "pending")


async def test_list_is_newest_first_and_filters_by_status_and_account(redis_client):
    queue = ReviewQueue(redis_client)
    a1, b1, a2, a3 = [await _flagged(queue, account=acc) for acc in ("acme", "other", "acme", "acme")]
    await queue.decide(a2.id, "approved")
    assert [i.id for i in await queue.list()] == [a3.id, a2.id, b1.id, a1.id]
    assert [i.id for i in await queue.list(limit=2)] == [a3.id, a2.id]
    assert [i.id for i in await queue.list(status="pending")] == [a3.id, b1.id, a1.id]
    assert [i.id for i in await queue.list(status="approved")] == [a2.id]
    assert [i.id for i in await queue.list(account="acme", status="pending")] == [a3.id, a1.id]


async def test_report_escalates_when_count_exceeds_threshold(redis_client):
    queue = ReviewQueue(redis_client)
    results = [await queue.report(account="acme", reference="post-9", image_url=None, threshold=3) for _ in range(4)]
    assert [(r.reports, r.escalated, r.review_id) for r in results[:3]] == [(1, False, None), (2, False, None), (3, False, None)]
    assert results[3].reports == 4 and results[3].escalated
    item = await queue.get(results[3].review_id, account="acme")
    assert (item.reason, item.kind, item.reference, item.status) == ("report_threshold", None, "post-9", "pending")


async def test_later_reports_answer_escalated_and_add_nothing(redis_client):
    queue = ReviewQueue(redis_client)
    results = [await queue.report(account="acme", reference="post-9", image_url=None, threshold=1) for _ in range(5)]
    assert [r.escalated for r in results] == [False, True, True, True, True]
    assert len({r.review_id for r in results[1:]}) == 1
    assert len(await queue.list()) == 1


async def test_one_reference_escalates_once_however_many_reports_race(redis_client):
    queue = ReviewQueue(redis_client)
    results = await asyncio.gather(
        *(queue.report(account="acme", reference="post-9", image_url=None, threshold=3) for _ in range(40))
    )
    assert sorted(r.reports for r in results) == list(range(1, 41))
    assert sum(r.escalated for r in results) == 37
    assert len({r.review_id for r in results if r.escalated}) == 1
    assert len(await queue.list()) == 1


async def test_reports_count_per_account_and_reference(redis_client):
    queue = ReviewQueue(redis_client)
    await queue.report(account="acme", reference="post-9", image_url=None, threshold=3)
    other_account = await queue.report(account="other", reference="post-9", image_url=None, threshold=3)
    other_reference = await queue.report(account="acme", reference="post-10", image_url=None, threshold=3)
    assert (other_account.reports, other_reference.reports) == (1, 1)
