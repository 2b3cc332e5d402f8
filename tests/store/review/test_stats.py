"""The queue's health: pending per account, the oldest pending item's age, decisions in the last hour."""

from __future__ import annotations

import pytest

from store.review.stats import QueueStats
from store.review.queue import ReviewQueue

pytestmark = pytest.mark.anyio
NOW = 1_800_000_000.0  # on the hour


async def _queued(queue: ReviewQueue, account: str, at: float) -> int:
    item = await queue.create(account=account, reason="model_flagged", kind="text", reference=None, image_url=None,
                              scores={"toxic": 0.6}, model_version="m", now=at, text="kept")  # fmt: skip
    return item.id


async def test_pending_per_account_oldest_age_and_decisions_per_hour(redis_client):
    queue, stats = ReviewQueue(redis_client), QueueStats(redis_client)
    first = await _queued(queue, "acme", NOW - 600)
    await _queued(queue, "acme", NOW - 60)
    await _queued(queue, "beta", NOW - 30)
    await queue.decide(first, "approved", now=NOW - 1800, decided_by="mia", reason_code="false_positive")
    health = await stats.health(now=NOW + 900)  # a quarter into the next hour
    assert health.pending_by_account == {"acme": 1, "beta": 1}
    assert health.oldest_pending_age_s == pytest.approx(960)
    assert health.decisions_last_hour == 1  # last hour's one decision, three quarters of it still inside the hour
    decided = await queue.get(first)
    assert (decided.decided_by, decided.reason_code, decided.text) == ("mia", "false_positive", "kept")


async def test_an_empty_queue_has_no_age(redis_client):
    health = await QueueStats(redis_client).health(now=NOW)
    assert (health.pending_by_account, health.oldest_pending_age_s, health.decisions_last_hour) == ({}, 0.0, 0)
