"""The monthly quota and the work in progress, atomic in Redis. The rate limit is tested through `ConfigStore.authorize` (test_authorize.py)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

import pytest
from support.quota import took

from store import redis_keys
from store.keys.quota import QUOTA_KEPT_AFTER_MONTH_END_S, WORK_SLOT_LEASE_S, QuotaStore, Taken, WorkSlot

pytestmark = pytest.mark.anyio

# A month far enough ahead that its counter has not expired.
JAN_LAST_SECOND = datetime(2090, 1, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
FEB_FIRST_SECOND = datetime(2090, 2, 1, 0, 0, 0, tzinfo=timezone.utc).timestamp()


async def test_quota_admits_up_to_the_quota_then_refuses(redis_client):
    limits = QuotaStore(redis_client)
    admitted = [await took(limits, "acme", 3, now=JAN_LAST_SECOND) for _ in range(4)]
    assert admitted == [True, True, True, False]
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 3


async def test_quota_never_admits_past_the_limit_under_concurrency(redis_client):
    limits = QuotaStore(redis_client)
    admitted = await asyncio.gather(*(took(limits, "acme", 20) for _ in range(50)))
    assert sum(admitted) == 20
    assert await limits.quota_used("acme") == 20


async def test_quota_is_per_account(redis_client):
    limits = QuotaStore(redis_client)
    assert await took(limits, "acme", 1, now=JAN_LAST_SECOND)
    assert not await took(limits, "acme", 1, now=JAN_LAST_SECOND)
    assert await took(limits, "other", 1, now=JAN_LAST_SECOND)


async def test_give_back_returns_a_unit(redis_client):
    limits = QuotaStore(redis_client)
    assert await took(limits, "acme", 1, now=JAN_LAST_SECOND)
    await limits.give_back_quota("acme", now=JAN_LAST_SECOND)
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 0
    assert await took(limits, "acme", 1, now=JAN_LAST_SECOND)


async def test_give_back_never_goes_below_zero(redis_client):
    limits = QuotaStore(redis_client)
    await limits.give_back_quota("acme", now=JAN_LAST_SECOND)
    await limits.give_back_quota("acme", now=JAN_LAST_SECOND)
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 0
    admitted = [await took(limits, "acme", 1, now=JAN_LAST_SECOND) for _ in range(2)]
    assert admitted == [True, False]


async def test_quota_resets_with_the_calendar_month(redis_client):
    limits = QuotaStore(redis_client)
    assert await took(limits, "acme", 1, now=JAN_LAST_SECOND)
    assert not await took(limits, "acme", 1, now=JAN_LAST_SECOND)
    assert await took(limits, "acme", 1, now=FEB_FIRST_SECOND)
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 1
    assert await limits.quota_used("acme", now=FEB_FIRST_SECOND) == 1


async def test_quota_counter_expires_some_days_after_its_month_ends(redis_client):
    await took(QuotaStore(redis_client), "acme", 1, now=JAN_LAST_SECOND)
    ttl_s = await redis_client.ttl(redis_keys.quota("acme", "2090-01"))
    expected_s = FEB_FIRST_SECOND + QUOTA_KEPT_AFTER_MONTH_END_S - time.time()
    assert ttl_s == pytest.approx(expected_s, abs=5)


async def test_units_are_taken_all_or_none_and_given_back_without_going_below_zero(redis_client):
    limits = QuotaStore(redis_client)
    assert await took(limits, "acme", 5, now=JAN_LAST_SECOND, units=3)
    assert not await took(limits, "acme", 5, now=JAN_LAST_SECOND, units=3)
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 3
    await limits.give_back_quota("acme", now=JAN_LAST_SECOND, units=10)
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 0


def slot(number: int, max_in_flight: int = 2) -> WorkSlot:
    return WorkSlot(slot_id=f"slot-{number}", max_in_flight=max_in_flight)


async def test_an_account_holds_at_most_max_in_flight_slots_and_a_refused_take_costs_no_unit(redis_client):
    limits = QuotaStore(redis_client)
    taken = [await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(n)) for n in range(3)]
    assert taken == [Taken.TAKEN, Taken.TAKEN, Taken.TOO_MANY_IN_FLIGHT]
    assert await limits.quota_used("acme", now=JAN_LAST_SECOND) == 2 and await limits.in_flight("acme") == 2
    assert await limits.take("other", 10, JAN_LAST_SECOND, 1, slot(9)) is Taken.TAKEN  # per account
    limits.release_slot("acme", slot(0))
    await limits.settled()
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(3)) is Taken.TAKEN


async def test_racing_takes_never_pass_max_in_flight(redis_client):
    limits = QuotaStore(redis_client)
    taken = await asyncio.gather(*(limits.take("acme", 100, JAN_LAST_SECOND, 1, slot(n, 5)) for n in range(40)))
    assert taken.count(Taken.TAKEN) == 5 and await limits.in_flight("acme") == 5


async def test_no_quota_takes_no_slot(redis_client):
    limits = QuotaStore(redis_client)
    assert await limits.take("acme", 1, JAN_LAST_SECOND, 2, slot(0)) is Taken.NO_QUOTA
    assert await limits.in_flight("acme") == 0


async def test_a_slot_whose_lease_ended_frees_itself_and_the_set_expires(redis_client):
    # A replica that died mid-request never gives its slot back: the lease does.
    limits = QuotaStore(redis_client)
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(0, max_in_flight=1)) is Taken.TAKEN
    key = redis_keys.work_in_progress("acme")
    assert 0 < await redis_client.ttl(key) <= WORK_SLOT_LEASE_S + 1
    await redis_client.zadd(key, {"slot-0": time.time() - 1})  # its lease ended
    assert await limits.in_flight("acme") == 0
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(1, max_in_flight=1)) is Taken.TAKEN


async def test_a_released_slot_is_given_back_by_the_accounts_next_take_before_any_background_step(redis_client):
    # A client that sends its next request the moment the last one answered never finds that one still in flight.
    limits = QuotaStore(redis_client)
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(0, max_in_flight=1)) is Taken.TAKEN
    limits.release_slot("acme", slot(0, max_in_flight=1))
    # No await in between: the background step has not run, so only the take itself can have given it back.
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(1, max_in_flight=1)) is Taken.TAKEN
    assert await redis_client.zrange(redis_keys.work_in_progress("acme"), 0, -1) == ["slot-1"]


async def test_released_slots_of_several_accounts_go_back_together_without_a_take(redis_client):
    limits = QuotaStore(redis_client)
    for account in ("acme", "globex"):
        for n in range(3):
            assert await limits.take(account, 10, JAN_LAST_SECOND, 1, slot(n, max_in_flight=3)) is Taken.TAKEN
    for account in ("acme", "globex"):
        for n in range(3):
            limits.release_slot(account, slot(n, max_in_flight=3))
    await limits.settled()
    assert await limits.in_flight("acme") == 0 and await limits.in_flight("globex") == 0


async def test_released_slots_a_failed_take_carried_are_given_back_later(redis_client):
    limits = QuotaStore(redis_client)
    assert await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(0)) is Taken.TAKEN
    limits.release_slot("acme", slot(0))

    async def store_gone(**_):
        raise ConnectionError("the store went away before the script ran")

    working_take, limits._take_quota = limits._take_quota, store_gone
    with pytest.raises(ConnectionError):
        await limits.take("acme", 10, JAN_LAST_SECOND, 1, slot(1))
    limits._take_quota = working_take
    await limits.settled()
    assert await limits.in_flight("acme") == 0
