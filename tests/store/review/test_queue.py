"""The review queue and content reports."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from store import redis_keys
from store.review import queue as queue_module
from store.review.browse import QueueFilter, ReviewBrowser
from store.review.queue import (
    InvalidReviewField,
    ReportLimitExceeded,
    ReviewAlreadyDecided,
    ReviewItemNotFound,
    ReviewQueue,
    ReviewQueueFull,
    ReviewRules,
    day_of,
)
from store.review.stats import QueueStats
from store.webhooks.endpoints import WebhookStore
from store.webhooks.outbox import Outbox
from webhooks.deliveries import WebhookRules

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


async def _pending(redis_client, account: str) -> int:
    """The account's pending items as the operators' page and metrics count them: what its cap counts."""
    return (await QueueStats(redis_client).health()).pending_by_account.get(account, 0)


async def test_a_created_item_is_pending_and_reads_back_as_created(redis_client):
    queue = ReviewQueue(redis_client)
    before = time.time()
    item = await _flagged(queue)
    assert item.status == "pending" and item.decided_at is None
    assert before <= item.created_at <= time.time()
    assert await queue.get(item.id) == item


async def test_an_items_id_tells_nothing_of_other_items_and_the_queue_keeps_its_order(redis_client):
    """Ids are random integers of 14 digits (JSON-safe, exact in the store's Lua): an account that sees its own learns
    neither how many items other accounts queued in between nor the next id; the order is the store's own."""
    queue = ReviewQueue(redis_client)
    mine = []
    for _ in range(10):
        mine.append((await _flagged(queue, account="acme")).id)
        await _flagged(queue, account="other")  # the volume a counter's ids would tell
    assert len(set(mine)) == 10 and all(10**13 <= item_id < 10**14 for item_id in mine)
    assert mine != sorted(mine)  # a counter's would be (random ones: 1 in 10! by chance)
    assert all(later - earlier not in (1, 2) for earlier, later in zip(mine, mine[1:]))
    assert [item.id for item in await queue.list(account="acme")] == mine[::-1]  # newest first
    assert [item.id for item in await ReviewBrowser(redis_client).pending(QueueFilter(account="acme"))] == mine


async def test_racing_creations_never_share_an_id_and_an_id_drawn_twice_is_drawn_again(redis_client, monkeypatch):
    queue = ReviewQueue(redis_client)
    items = await asyncio.gather(*(_flagged(queue) for _ in range(20)))
    assert len({item.id for item in items}) == 20
    taken = items[0].id
    draws = iter([taken, taken, 10**13 + 7, taken, 10**13 + 8])
    monkeypatch.setattr(queue_module, "new_review_id", lambda: next(draws))
    assert (await _flagged(queue, account="other")).id == 10**13 + 7
    escalated = await queue.report(account="other", reference="post-1", image_url=None, threshold=0)
    assert (escalated.review_id, escalated.reports) == (10**13 + 8, 1)  # the refused try counted nothing
    assert await queue.get(taken) == items[0]  # untouched


async def test_the_largest_id_reaches_webhooks_and_the_hash_bank_exactly(redis_client, monkeypatch):
    """The store's Lua writes numbers in JSON with 14 significant digits: an id of 15 would arrive rounded."""
    await WebhookStore(redis_client, WebhookRules(allow_private=True)).create(
        "acme", "http://127.0.0.1:9/hook", ["review.created"])  # fmt: skip
    monkeypatch.setattr(queue_module, "new_review_id", lambda: 10**14 - 1)
    queue, pdq = ReviewQueue(redis_client), "f" * 32 + "0" * 32
    item = await queue.create(account="acme", reason="model_flagged", kind="image", reference=None, image_url=None,
                              scores={}, model_version=None, pdq=pdq)  # fmt: skip
    await queue.decide(item.id, "rejected")
    [delivery] = await Outbox(redis_client, WebhookRules(allow_private=True)).claim(10)
    assert json.loads(delivery.body)["data"]["id"] == item.id == 99_999_999_999_999
    assert json.loads(await redis_client.hget(redis_keys.hash_bank("acme"), pdq))["review_id"] == item.id


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


# Retention and caps (README "Keys, plans, profiles and limits"; SECURITY.md).

DAY = 24 * 3600


async def test_a_report_counter_expires_after_its_ttl_and_each_report_renews_it(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(report_counter_ttl_s=1000))
    await queue.report(account="acme", reference="post-9", image_url=None, threshold=3)
    counter = redis_keys.report_counter("acme", "post-9")
    await redis_client.expire(counter, 10)
    await queue.report(account="acme", reference="post-9", image_url=None, threshold=3)
    assert 990 <= await redis_client.ttl(counter) <= 1000


async def test_the_default_report_counter_ttl_is_30_days(redis_client):
    await ReviewQueue(redis_client).report(account="acme", reference="post-9", image_url=None, threshold=3)
    assert 30 * DAY - 10 <= await redis_client.ttl(redis_keys.report_counter("acme", "post-9")) <= 30 * DAY


async def test_a_forgotten_counter_counts_afresh(redis_client):
    queue = ReviewQueue(redis_client)
    for _ in range(2):
        await queue.report(account="acme", reference="post-9", image_url=None, threshold=3)
    await redis_client.delete(redis_keys.report_counter("acme", "post-9"))  # what its TTL does
    assert (await queue.report(account="acme", reference="post-9", image_url=None, threshold=3)).reports == 1


async def test_the_reference_is_stored_in_a_counter_only_as_a_hash(redis_client):
    reference = "post-" + "x" * 4000
    await ReviewQueue(redis_client).report(account="acme", reference=reference, image_url=None, threshold=3)
    keys = [key async for key in redis_client.scan_iter("mod:reports:ref:*")]
    assert keys == [redis_keys.report_counter("acme", reference)] and len(keys[0]) < 100


async def test_reports_per_account_per_day_are_capped_and_a_refused_report_counts_nothing(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(reports_per_account_per_day=3))
    now = time.time()
    rest_of_day = day_of(now)[2]
    for i in range(3):
        await queue.report(account="acme", reference=f"post-{i}", image_url=None, threshold=5, now=now)
    with pytest.raises(ReportLimitExceeded) as refused:
        await queue.report(account="acme", reference="post-0", image_url=None, threshold=5, now=now)
    assert refused.value.limit == "reports"
    assert refused.value.retry_after_s == pytest.approx(rest_of_day)  # until 00:00 UTC
    assert await queue.daily_reports("acme", now=now) == 3
    # Nothing was counted: the reference's count goes on from 1, the next UTC day.
    again = await queue.report(account="acme", reference="post-0", image_url=None, threshold=5, now=now + rest_of_day)
    assert again.reports == 2 and await queue.daily_reports("acme", now=now + rest_of_day) == 1
    # Another account is not affected.
    assert (await queue.report(account="other", reference="post-0", image_url=None, threshold=5, now=now)).reports == 1


async def test_the_day_counters_expire_a_day_after_their_day(redis_client):
    now = time.time()
    await ReviewQueue(redis_client).report(account="acme", reference="p", image_url=None, threshold=0, now=now)
    day, expire_at, rest_of_day = day_of(now)
    assert day == time.strftime("%Y-%m-%d", time.gmtime(now))
    assert expire_at == round(now + rest_of_day) + DAY
    for key in (redis_keys.reports_on_day("acme", day), redis_keys.escalations_on_day("acme", day)):
        assert await redis_client.expiretime(key) == expire_at


async def test_escalations_per_account_per_day_are_capped(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(escalations_per_account_per_day=1))
    now = time.time()
    first = await queue.report(account="acme", reference="a", image_url=None, threshold=0, now=now)
    assert first.escalated
    with pytest.raises(ReportLimitExceeded) as refused:
        await queue.report(account="acme", reference="b", image_url=None, threshold=0, now=now)
    assert refused.value.limit == "escalations"
    assert await redis_client.exists(redis_keys.report_counter("acme", "b")) == 0  # nothing counted
    # Reports that escalate nothing are still taken, and the next day the refused one escalates.
    assert (await queue.report(account="acme", reference="a", image_url=None, threshold=0, now=now)).reports == 2
    tomorrow = await queue.report(account="acme", reference="b", image_url=None, threshold=0, now=now + DAY)
    assert (tomorrow.reports, tomorrow.escalated) == (1, True)
    assert len(await queue.list(account="acme")) == 2


async def test_racing_reports_never_pass_the_daily_cap(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(reports_per_account_per_day=5))
    outcomes = await asyncio.gather(
        *(queue.report(account="acme", reference=f"p{i}", image_url=None, threshold=9) for i in range(30)),
        return_exceptions=True,
    )
    assert sum(not isinstance(o, Exception) for o in outcomes) == 5
    assert all(isinstance(o, ReportLimitExceeded) for o in outcomes if isinstance(o, Exception))


async def test_a_decided_item_expires_after_its_retention(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(decided_retention_s=7 * DAY))
    item = await _flagged(queue)
    decided = await queue.decide(item.id, "approved")
    assert decided.status == "approved"
    assert 7 * DAY - 10 <= await redis_client.ttl(redis_keys.review_item(item.id)) <= 7 * DAY + 1



async def test_an_expired_item_leaves_every_index(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(decided_retention_s=DAY))
    old, kept = await _flagged(queue), await _flagged(queue)
    await queue.decide(old.id, "rejected", now=time.time() - DAY - 60)  # its retention is already over
    assert await queue.get(old.id) is None
    await queue.decide(kept.id, "rejected")  # prunes what is due
    assert [i.id for i in await queue.list()] == [kept.id]
    for index in (
        redis_keys.review_all(), redis_keys.review_by_status("rejected"), redis_keys.review_by_account("acme"),
    ):  # fmt: skip
        assert await redis_client.zscore(index, old.id) is None
        assert await redis_client.zscore(index, kept.id) is not None
    assert await redis_client.zrange(redis_keys.review_expiring(), 0, -1) == [f"{kept.id}:acme"]


# Pending items: a time to live, and a cap per account (SECURITY.md: the review queue cannot fill the store).


async def test_a_pending_item_expires_after_its_pending_retention_and_a_decision_moves_it(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_retention_s=3 * DAY, decided_retention_s=7 * DAY))
    item = await _flagged(queue)
    assert 3 * DAY - 10 <= await redis_client.ttl(redis_keys.review_item(item.id)) <= 3 * DAY + 1
    await queue.decide(item.id, "approved")
    assert 7 * DAY - 10 <= await redis_client.ttl(redis_keys.review_item(item.id)) <= 7 * DAY + 1
    assert await redis_client.zcard(redis_keys.review_pending_of("acme")) == 0


async def test_the_default_pending_retention_is_30_days_and_the_cap_10000():
    rules = ReviewRules()
    assert (rules.pending_retention_s, rules.pending_per_account) == (30 * DAY, 10_000)


async def test_an_expired_pending_item_leaves_every_index_at_the_next_creation(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_retention_s=DAY))
    old = await queue.create(account="acme", reason="model_flagged", kind="text", reference="r", image_url=None,
                             scores={}, model_version=None, now=time.time() - DAY - 60)  # fmt: skip
    assert await queue.get(old.id) is None  # its hash is gone with its time
    new = await _flagged(queue, account="other")  # prunes what is due
    for index in (
        redis_keys.review_all(), redis_keys.review_by_status("pending"), redis_keys.review_by_account("acme"),
        redis_keys.review_pending_of("acme"),
    ):  # fmt: skip
        assert await redis_client.zscore(index, old.id) is None, index
    assert await redis_client.zrange(redis_keys.review_expiring(), 0, -1) == [f"{new.id}:other"]
    assert [i.id for i in await queue.list()] == [new.id]


async def test_an_account_at_its_pending_cap_queues_nothing_and_other_accounts_still_do(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_per_account=3))
    for _ in range(3):
        await _flagged(queue)
    with pytest.raises(ReviewQueueFull) as full:
        await _flagged(queue)
    assert full.value.cap == 3 and full.value.retry_after_s >= 1
    assert await _pending(redis_client, "acme") == 3 and len(await queue.list(account="acme")) == 3
    assert await redis_client.get(redis_keys.review_sequence()) == "3"  # no place handed out for nothing
    assert (await _flagged(queue, account="other")).status == "pending"


async def test_deciding_or_expiring_a_pending_item_makes_room_under_the_cap(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_per_account=2, pending_retention_s=DAY))
    first = await _flagged(queue)
    await queue.create(account="acme", reason="model_flagged", kind="text", reference=None, image_url=None,
                       scores={}, model_version=None, now=time.time() - DAY - 60)  # already expired  # fmt: skip
    second = await _flagged(queue)  # the expired one does not count
    with pytest.raises(ReviewQueueFull):
        await _flagged(queue)
    await queue.decide(first.id, "rejected")  # decided items do not count either
    third = await _flagged(queue)
    assert third.status == "pending" and third.id not in (first.id, second.id)


async def test_racing_creations_never_pass_the_pending_cap(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_per_account=5))
    outcomes = await asyncio.gather(*(_flagged(queue) for _ in range(30)), return_exceptions=True)
    assert sum(not isinstance(o, Exception) for o in outcomes) == 5
    assert all(isinstance(o, ReviewQueueFull) for o in outcomes if isinstance(o, Exception))
    assert await _pending(redis_client, "acme") == 5


async def test_a_report_that_would_pass_the_pending_cap_is_refused_and_counts_nothing(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_per_account=1))
    await _flagged(queue)
    with pytest.raises(ReviewQueueFull):
        await queue.report(account="acme", reference="post-1", image_url=None, threshold=0)
    assert await redis_client.exists(redis_keys.report_counter("acme", "post-1")) == 0  # nothing counted
    # A report that escalates nothing is still counted; reports of another account still escalate.
    assert (await queue.report(account="acme", reference="post-2", image_url=None, threshold=5)).reports == 1
    assert (await queue.report(account="other", reference="post-1", image_url=None, threshold=0)).escalated


async def test_items_queued_by_reports_expire_and_count_against_the_cap(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(pending_per_account=1, pending_retention_s=2 * DAY))
    escalated = await queue.report(account="acme", reference="post-1", image_url=None, threshold=0)
    assert 2 * DAY - 10 <= await redis_client.ttl(redis_keys.review_item(escalated.review_id)) <= 2 * DAY + 1
    with pytest.raises(ReviewQueueFull):
        await _flagged(queue)


async def test_every_key_the_queue_writes_expires_or_is_bounded_by_items_that_do(redis_client):
    """The store cannot grow without end: each key has a TTL, or is an index whose members are items that have one."""
    queue = ReviewQueue(redis_client)
    item = await _flagged(queue)
    await queue.report(account="acme", reference="post-1", image_url=None, threshold=0)
    await queue.decide(item.id, "approved")
    indexes = {redis_keys.review_sequence(), redis_keys.review_all(), redis_keys.review_expiring(),
               redis_keys.review_pending_accounts(),
               redis_keys.review_by_account("acme"), redis_keys.review_pending_of("acme"),
               redis_keys.review_pending_ids_of("acme"), *(redis_keys.review_by_status(s) for s in ("pending", "approved", "rejected"))}  # fmt: skip
    keys = [key async for key in redis_client.scan_iter("mod:*")]
    assert [key for key in keys if key not in indexes and await redis_client.ttl(key) < 0] == []
    expiring = await redis_client.zrange(redis_keys.review_expiring(), 0, -1)
    assert sorted(int(member.split(":")[0]) for member in expiring) == sorted(
        int(i) for i in await redis_client.zrange(redis_keys.review_all(), 0, -1)
    )


async def test_prune_takes_expired_items_of_accounts_with_colons_out_of_their_index(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(decided_retention_s=DAY))
    item = await _flagged(queue, account="org:team")
    await queue.decide(item.id, "approved", now=time.time() - 2 * DAY)
    assert await queue.prune() == 1
    assert await redis_client.zcard(redis_keys.review_by_account("org:team")) == 0
    assert await queue.prune() == 0


async def test_reports_of_an_item_that_is_gone_escalate_again(redis_client):
    queue = ReviewQueue(redis_client)
    first = await queue.report(account="acme", reference="post-9", image_url=None, threshold=0)
    await queue.decide(first.review_id, "approved", now=time.time() - 31 * DAY)  # decided and expired
    again = await queue.report(account="acme", reference="post-9", image_url=None, threshold=0)
    assert again.escalated and again.review_id != first.review_id and again.reports == 1


@pytest.mark.parametrize("field", ["reference", "image_url"])
async def test_stored_fields_are_capped_at_4096_characters(redis_client, field):
    queue = ReviewQueue(redis_client)
    fields = {"reference": "r", "image_url": None}
    fields[field] = "x" * 4096
    assert await queue.create(account="a", reason="model_flagged", kind="text", scores={}, model_version=None, **fields)
    await queue.report(account="a", threshold=3, **fields)
    fields[field] = "x" * 4097
    with pytest.raises(InvalidReviewField):
        await queue.create(account="a", reason="model_flagged", kind="text", scores={}, model_version=None, **fields)
    with pytest.raises(InvalidReviewField):
        await queue.report(account="a", threshold=3, **fields)
    assert len(await queue.list()) == 1


def test_review_rules_refuse_nonsense():
    with pytest.raises(ValueError):
        ReviewRules(decided_retention_s=0)
    with pytest.raises(ValueError):
        ReviewRules(reports_per_account_per_day=-1)
    with pytest.raises(ValueError):
        ReviewRules(pending_retention_s=0)
    with pytest.raises(ValueError):
        ReviewRules(pending_per_account=-1)


async def test_a_full_store_refuses_each_review_script_whole(tmp_path):
    """A script's first write must be one a full store refuses: once a script has written (even a ZREM), Redis lets
    its later writes through past maxmemory. So creating, reporting and deciding are refused whole, never half."""
    import redis.asyncio
    from redis.exceptions import OutOfMemoryError

    from runtime.embedded_store import EmbeddedStore

    with EmbeddedStore(tmp_path / "store", maxmemory_mb=2) as server:
        client = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
        queue = ReviewQueue(client)
        try:
            # An item due in 3 s: then deciding has something to prune, as the old scripts did first.
            await _flagged(ReviewQueue(client, ReviewRules(pending_retention_s=2)))
            with pytest.raises(OutOfMemoryError):
                for _ in range(2000):
                    await queue.create(account="acme", reason="model_flagged", kind="text", reference="r" * 4096,
                                       image_url=None, scores={}, model_version=None)  # fmt: skip
            pending = (await client.zrevrange(redis_keys.review_by_status("pending"), 0, 0))[0]
            await asyncio.sleep(3.5)
            assert await client.zcount(redis_keys.review_expiring(), "-inf", time.time()) == 1
            with pytest.raises(OutOfMemoryError):
                await queue.report(account="acme", reference="post-1", image_url=None, threshold=5)
            with pytest.raises(OutOfMemoryError):
                await queue.decide(int(pending), "rejected")
            assert await client.exists(redis_keys.report_counter("acme", "post-1")) == 0
            assert (await queue.get(int(pending))).status == "pending"
            assert await client.zcount(redis_keys.review_expiring(), "-inf", time.time()) == 1  # nothing half done
        finally:
            await client.aclose()
