"""An account keeps at most `report_counters_per_account` report counters: past it, its least recently reported
references are forgotten first, and no other account's (store/review/report_counters.py)."""

from __future__ import annotations

import pytest

from store import redis_keys
from store.review.queue import DAY_S, ReviewQueue, ReviewRules

pytestmark = pytest.mark.anyio
NOW = 1_790_000_000.0


async def _report(queue: ReviewQueue, reference: str, at: float, account: str = "acme") -> int:
    counted = await queue.report(account=account, reference=reference, image_url=None, threshold=10, now=at)
    return counted.reports


async def _counted(redis_client, reference: str, account: str = "acme") -> bool:
    return await redis_client.exists(redis_keys.report_counter(account, reference)) == 1


async def test_past_the_cap_the_least_recently_reported_references_are_forgotten_first(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(report_counters_per_account=3))
    for n, reference in enumerate(["a", "b", "c", "d"]):
        await _report(queue, reference, NOW + n)
    assert [await _counted(redis_client, ref) for ref in "abcd"] == [False, True, True, True]
    assert await _report(queue, "b", NOW + 4) == 2  # b is now the most recently reported
    await _report(queue, "e", NOW + 5)
    assert [await _counted(redis_client, ref) for ref in "bcde"] == [True, False, True, True]
    assert await _report(queue, "a", NOW + 6) == 1  # forgotten: it counts afresh, as after its 30 days
    assert await redis_client.zcard(redis_keys.report_counters_of("acme")) == 3


async def test_one_accounts_flood_of_references_forgets_only_its_own_counts(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(report_counters_per_account=3))
    await _report(queue, "post-1", NOW, account="other-co")
    await _report(queue, "post-1", NOW + 1, account="other-co")
    for n in range(50):
        await _report(queue, f"flood-{n}", NOW + 2 + n)
    assert await _report(queue, "post-1", NOW + 60, account="other-co") == 3
    flood = [key async for key in redis_client.scan_iter(match=redis_keys.REPORT_COUNTER_PREFIX + "*:acme")]
    assert len(flood) == 3


async def test_the_index_expires_with_its_newest_counter(redis_client):
    queue = ReviewQueue(redis_client, ReviewRules(report_counter_ttl_s=DAY_S))
    await _report(queue, "a", NOW)
    index = redis_keys.report_counters_of("acme")
    counter = await redis_client.expiretime(redis_keys.report_counter("acme", "a"))
    assert counter > 0 and abs(await redis_client.expiretime(index) - counter) <= 1
