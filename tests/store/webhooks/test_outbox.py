"""The webhook outbox against a real store: deliveries written in the review scripts' own step, claimed with a lease,
retried on the schedule, settled once, logged, sent again on request."""

from __future__ import annotations

import json
import random
import time

import pytest

from store import redis_keys
from store.webhooks import outbox as outbox_module
from store.webhooks.outbox import Outbox
from webhooks.deliveries import Attempt, next_try_in
from store.review.queue import ReviewQueue
from store.webhooks.endpoints import WebhookStore
from webhooks.deliveries import WebhookRules

pytestmark = pytest.mark.anyio
RULES = WebhookRules(allow_private=True, retry_schedule_s=(0, 5, 300), jitter=0.0)


async def _flag(queue: ReviewQueue, account: str = "acme", pdq: str | None = None):
    return await queue.create(
        account=account, reason="model_flagged", kind="image", reference="post-1", image_url=None,
        scores={"nsfw": 0.75}, model_version="nsfw=open-nsfw-1.0", pdq=pdq,
    )  # fmt: skip


async def _endpoint(redis_client, account="acme", events=("review.created", "review.decided", "report.escalated")):
    endpoint, secret = await WebhookStore(redis_client, RULES).create(account, "http://127.0.0.1:9/hook", list(events))
    return endpoint, secret


async def test_an_item_created_for_an_account_with_an_endpoint_has_its_delivery_from_the_same_step(redis_client):
    endpoint, _ = await _endpoint(redis_client)
    item = await _flag(ReviewQueue(redis_client))
    [delivery] = await Outbox(redis_client, RULES).claim(10)
    body = json.loads(delivery.body)
    assert delivery.event_type == "review.created" and delivery.endpoint_id == endpoint.id
    assert body["type"] == "review.created" and body["timestamp"].endswith("Z")
    assert body["data"] == {
        "id": item.id, "reference": "post-1", "status": "pending", "reason": "model_flagged", "kind": "image",
        "created_at": pytest.approx(item.created_at), "decided_at": None, "categories": {"nsfw": 0.75},
    }  # fmt: skip


async def test_no_endpoint_no_subscription_or_a_disabled_endpoint_writes_no_delivery(redis_client):
    queue, outbox, store = ReviewQueue(redis_client), Outbox(redis_client, RULES), WebhookStore(redis_client, RULES)
    await _flag(queue)  # no endpoint at all
    decided_only, _ = await _endpoint(redis_client, events=["review.decided"])
    await _flag(queue)
    assert await outbox.claim(10) == []
    await store.update(decided_only.id, enabled=False)
    item = await _flag(queue)
    await queue.decide(item.id, "approved")
    assert await outbox.claim(10) == []
    await store.update(decided_only.id, enabled=True)
    item = await _flag(queue)
    await queue.decide(item.id, "rejected")
    [delivery] = await outbox.claim(10)
    assert json.loads(delivery.body)["data"]["status"] == "rejected"


async def test_a_decision_and_an_escalation_write_their_events_with_distinct_ids(redis_client):
    await _endpoint(redis_client)
    queue, outbox = ReviewQueue(redis_client), Outbox(redis_client, RULES)
    escalated = await queue.report(account="acme", reference="post-9", image_url=None, threshold=0)
    await queue.decide(escalated.review_id, "approved")
    deliveries = await outbox.claim(10)
    assert sorted(d.event_type for d in deliveries) == ["report.escalated", "review.created", "review.decided"]
    assert len({d.event_id for d in deliveries}) == 3
    decided = next(d for d in deliveries if d.event_type == "review.decided")
    assert json.loads(decided.body)["data"]["decided_at"] is not None


async def test_a_claimed_delivery_is_leased_then_retried_on_the_schedule_then_fails(redis_client):
    await _endpoint(redis_client)
    await _flag(ReviewQueue(redis_client))
    outbox, t0 = Outbox(redis_client, RULES), time.time() + 1
    [delivery] = await outbox.claim(10, now=t0)
    assert await outbox.claim(10, now=t0 + outbox.lease_s - 1) == []  # leased
    logged = await outbox.record(delivery, Attempt("http_error", status=503), now=t0)
    assert logged.next_try_at == pytest.approx(t0 + 5)  # the schedule's second wait
    assert await outbox.claim(10, now=t0 + 4) == []
    [again] = await outbox.claim(10, now=t0 + 5)
    logged = await outbox.record(again, Attempt("http_error", status=500, retry_after_s=900), now=t0 + 5)
    assert logged.next_try_at == pytest.approx(t0 + 905)  # Retry-After above the schedule's 300 s wins
    [third] = await outbox.claim(10, now=t0 + 905)
    assert (await outbox.record(third, Attempt("timeout"), now=t0 + 905)).next_try_at is None  # schedule spent
    assert await outbox.claim(10, now=t0 + 10**6) == []
    assert (await redis_client.hgetall(redis_keys.webhook_delivery(f"{third.event_id}:{third.endpoint_id}")))["status"] == "failed"
    assert await outbox.backlog() == (0, 0.0)
    log = await outbox.log(third.endpoint_id)
    assert [(e.attempt, e.outcome, e.status) for e in log] == [(3, "timeout", None), (2, "http_error", 500),
                                                               (1, "http_error", 503)]  # fmt: skip


async def test_a_410_drops_the_delivery_and_disables_the_endpoint_and_redelivery_starts_again(redis_client):
    endpoint, _ = await _endpoint(redis_client)
    await _flag(ReviewQueue(redis_client))
    outbox = Outbox(redis_client, RULES)
    [delivery] = await outbox.claim(10)
    await outbox.record(delivery, Attempt("gone", status=410, disable_endpoint=True, final=True))
    stored = await WebhookStore(redis_client, RULES).get(endpoint.id)
    assert not stored.enabled and "410" in stored.disabled_reason
    assert (await redis_client.hgetall(redis_keys.webhook_delivery(f"{delivery.event_id}:{endpoint.id}")))["status"] == "dropped"
    assert await outbox.redeliver(endpoint.id, delivery.event_id) is True
    assert await outbox.redeliver(endpoint.id, "msg_unknown") is False
    [again] = await outbox.claim(10)
    assert again.event_id == delivery.event_id and again.round_start == again.attempts == 1
    assert again.endpoint is not None and not again.endpoint.enabled


async def test_the_backlog_counts_pending_deliveries_and_the_oldest_ones_age(redis_client):
    await _endpoint(redis_client)
    await _endpoint(redis_client)
    await _flag(ReviewQueue(redis_client))
    depth, age = await Outbox(redis_client, RULES).backlog(now=10**10)
    assert depth == 2 and age > 0


def test_the_default_schedule_is_standard_webhooks_and_jitter_stays_within_its_share():
    rules = WebhookRules()
    assert rules.retry_schedule_s == (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    assert sum(rules.retry_schedule_s) / 3600 == pytest.approx(27.6, abs=0.1)  # the last try ~28 h after the event
    rng = random.Random(1)
    waits = [next_try_in(rules, 2, None, rng) for _ in range(200)]
    assert 270 <= min(waits) < 300 < max(waits) <= 330
    assert next_try_in(rules, len(rules.retry_schedule_s), None, rng) is None
    assert next_try_in(rules, 1, 10**9, rng) == rules.max_retry_after_s


async def test_a_rejected_item_with_a_hash_joins_its_accounts_bank_in_the_decisions_step(redis_client):
    queue = ReviewQueue(redis_client)
    pdq = "f" * 32 + "0" * 32
    approved, rejected = await _flag(queue, pdq=pdq), await _flag(queue, pdq=pdq)
    await queue.decide(approved.id, "approved")
    assert await redis_client.hlen(redis_keys.hash_bank("acme")) == 0
    await queue.decide(rejected.id, "rejected")
    entry = json.loads(await redis_client.hget(redis_keys.hash_bank("acme"), pdq))
    assert entry["review_id"] == rejected.id
    assert await redis_client.get(redis_keys.hash_bank_version("acme")) == "1"
    assert (await queue.get(rejected.id)).pdq == pdq


async def test_a_text_items_kept_text_and_its_moderators_name_never_reach_a_webhook(redis_client):
    await _endpoint(redis_client)
    queue, outbox = ReviewQueue(redis_client), Outbox(redis_client, RULES)
    words = "zqxjv the user's own words"
    item = await queue.create(account="acme", reason="model_flagged", kind="text", reference="comment-7",
                              image_url=None, scores={"toxic": 0.6}, model_version="text-1", text=words)  # fmt: skip
    assert (await queue.get(item.id, account="acme")).text == words  # kept for the moderator
    await queue.decide(item.id, "rejected", decided_by="olga-the-moderator", reason_code="harassment")
    deliveries = await outbox.claim(10)
    assert sorted(d.event_type for d in deliveries) == ["review.created", "review.decided"]
    for delivery in deliveries:
        assert b"zqxjv" not in delivery.body and b"olga" not in delivery.body
        assert set(json.loads(delivery.body)["data"]) == {"id", "reference", "status", "reason", "kind", "created_at",
                                                          "decided_at", "categories"}  # fmt: skip


async def test_the_claim_goes_account_by_account_within_each_accounts_share(redis_client):
    await _endpoint(redis_client, account="big")
    await _endpoint(redis_client, account="small")
    queue, outbox = ReviewQueue(redis_client), Outbox(redis_client, RULES)
    for _ in range(10):
        await _flag(queue, account="big")  # older, and more than the claim takes
    await _flag(queue, account="small")
    first = await outbox.claim(4, per_account=2)
    assert sorted(d.account for d in first) == ["big", "big", "small"]
    # "big" has its share in flight: nothing more of it, however much is due; a recorded attempt frees one more.
    assert await outbox.claim(4, per_account=2) == []
    await outbox.record(next(d for d in first if d.account == "big"), Attempt("delivered", status=200, final=True))
    [next_one] = await outbox.claim(4, per_account=2)
    assert next_one.account == "big"
    assert len(await outbox.claim(100)) == 7  # without a share: the rest


async def test_a_delivery_left_in_the_shared_due_set_of_an_earlier_version_is_still_delivered(redis_client):
    endpoint, _ = await _endpoint(redis_client)
    await _flag(ReviewQueue(redis_client))
    lane = f"{redis_keys.WEBHOOK_DUE_LANE_PREFIX}acme"  # as the outbox's scripts name it
    [member] = await redis_client.zrange(lane, 0, -1)
    # As an earlier version wrote it: no account field, one shared due set, no lanes.
    await redis_client.hdel(redis_keys.webhook_delivery(member), "account")
    await redis_client.delete(lane, redis_keys.webhook_due_accounts())
    await redis_client.zadd(redis_keys.webhook_legacy_due(), {member: time.time() - 1})
    outbox = Outbox(redis_client, RULES)
    [delivery] = await outbox.claim(10)
    assert (delivery.member, delivery.account) == (member, "acme")
    assert await redis_client.zcard(redis_keys.webhook_legacy_due()) == 0
    await outbox.record(delivery, Attempt("delivered", status=200, final=True))
    assert await redis_client.zcard(redis_keys.webhook_due_accounts()) == 0
    assert await outbox.backlog() == (0, 0.0) and (await outbox.log(endpoint.id))[0].outcome == "delivered"


async def test_an_accounts_share_holds_across_workers_and_a_dead_workers_count_ends_with_its_lease(redis_client):
    await _endpoint(redis_client, account="big")
    await _endpoint(redis_client, account="small")
    queue = ReviewQueue(redis_client)
    for _ in range(10):
        await _flag(queue, account="big")
    first_worker, second_worker, t0 = Outbox(redis_client, RULES), Outbox(redis_client, RULES), time.time() + 1
    taken = await first_worker.claim(8, per_account=2, now=t0)
    assert len(taken) == 2
    assert await second_worker.claim(8, per_account=2, now=t0) == []  # the share is the account's, not a worker's
    await _flag(queue, account="small")
    [small] = await second_worker.claim(1, per_account=2, now=t0)  # past "big", due first but at its share
    assert small.account == "small"
    # The first worker dies without recording anything: its two stay counted until their lease ends, no longer.
    assert await second_worker.claim(8, per_account=2, now=t0 + first_worker.lease_s - 1) == []
    again = await second_worker.claim(8, per_account=2, now=t0 + first_worker.lease_s)
    again = [delivery for delivery in again if delivery.account == "big"]  # ("small"'s lease ended too)
    assert len(again) == 2
    await second_worker.record(again[0], Attempt("http_error", status=503), now=t0 + first_worker.lease_s)
    [one_more] = await second_worker.claim(8, per_account=2, now=t0 + first_worker.lease_s)
    assert one_more.member not in {d.member for d in again}


async def test_past_its_cap_an_accounts_oldest_undelivered_deliveries_go_unsent_and_no_change_fails(
    redis_client, monkeypatch
):
    cap = 20  # the rule with a small cap (the code's own is MAX_UNDELIVERED_PER_ACCOUNT)
    monkeypatch.setattr(outbox_module, "MAX_UNDELIVERED_PER_ACCOUNT", cap)
    endpoint, _ = await _endpoint(redis_client)  # its receiver is down: nothing is ever delivered
    await _endpoint(redis_client, account="other")
    queue, outbox = ReviewQueue(redis_client), Outbox(redis_client, RULES)
    items = [await _flag(queue)]
    [in_flight] = await outbox.claim(1, now=time.time() + 1)  # the very first, being sent when it is dropped
    items += [await _flag(queue) for _ in range(cap + 3)]
    assert len(items) == cap + 4  # every creation succeeded
    await queue.decide(items[-1].id, "rejected")  # and a decision on a full backlog too
    await _flag(queue, account="other")
    assert await redis_client.zcard(redis_keys.webhook_undelivered_of("acme")) == cap
    assert await outbox.backlog() == (cap + 1, pytest.approx(0, abs=30))
    assert await outbox.dropped_for_backlog() == 5  # one per event past the cap
    dropped = [entry for entry in await outbox.log(endpoint.id) if entry.outcome == "backlog_full"]
    assert len(dropped) == 5 and f"{cap} deliveries waiting" in dropped[0].error
    assert dropped[-1].event_id == in_flight.event_id  # the oldest went first
    assert await redis_client.exists(redis_keys.webhook_delivery(in_flight.member)) == 0
    # The attempt under way when its delivery was dropped is recorded as nothing, and frees its place in the share.
    await outbox.record(in_flight, Attempt("timeout"))
    assert await redis_client.exists(redis_keys.webhook_sending_of("acme")) == 0
    claimed = await outbox.claim(cap + 10, now=time.time() + 1)
    assert len(claimed) == cap + 1
    assert {d.event_id for d in dropped}.isdisjoint(d.event_id for d in claimed)
    assert "review.decided" in {d.event_type for d in claimed} and "other" in {d.account for d in claimed}
