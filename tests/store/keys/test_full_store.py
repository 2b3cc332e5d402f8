"""Admission on a full store (`maxmemory`, `noeviction`): its scripts are refused whole, whatever they would remove
first, so that a request is never admitted past the limit; a unit taken before the store filled still goes back."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
import redis
import redis.asyncio

from policy.types import CategoryThresholds, Plan, Profile
from runtime.embedded_store import EmbeddedStore
from store.keys.config import ConfigStore
from store.keys.quota import Admission, QuotaStore, Taken, WorkSlot

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A store of these tests' own: they change its `maxmemory`."""
    with EmbeddedStore(tmp_path_factory.mktemp("full-store")) as store:
        yield store


@pytest.fixture
async def client(server):
    with redis.Redis.from_url(server.admin_url) as owner:
        owner.flushdb()
    connection = redis.asyncio.Redis.from_url(server.url, decode_responses=True)
    yield connection
    await connection.aclose()


@contextmanager
def full(server: EmbeddedStore):
    """The store full for sure: its limit below what it already uses; the limit restored after."""
    with redis.Redis.from_url(server.admin_url) as owner:
        limit = owner.config_get("maxmemory")["maxmemory"]
        owner.config_set("maxmemory", owner.info("memory")["used_memory"] // 2)
        try:
            yield
        finally:
            owner.config_set("maxmemory", limit)


async def _key(client) -> tuple[ConfigStore, str]:
    config = ConfigStore(client)
    await config.put_plan(Plan(name="starter", scope="both", monthly_quota=1000, rate_per_second=5, burst=10))
    thresholds = CategoryThresholds(review=0.6, block=0.9)
    categories = {"nsfw": thresholds, "toxic": thresholds}
    await config.put_profile(Profile(name="default", mode="enforce", categories=categories))
    _, secret = await config.create_key("acme", "default", "starter")
    return config, secret


async def test_the_authorizing_step_that_gives_back_ended_slots_first_is_still_refused_whole(server, client):
    """Its first write used to be the removal of this replica's ended slots: once a script has written, Redis lets
    its later writes through past `maxmemory`, so the request took its rate token, unit and slot on a full store."""
    config, secret = await _key(client)
    quota = QuotaStore(client)
    admission = Admission(charged_at=time.time(), slot_id="this-request", kind="text", released=(("acme", "ended"),))
    with full(server):
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            await config.authorize(secret, admission=admission)
    assert await quota.quota_used("acme") == 0 and await quota.in_flight("acme") == 0
    assert [key async for key in client.scan_iter(match="mod:rate:*")] == []


async def test_a_further_take_of_units_is_refused_whole(server, client):
    """TAKE_QUOTA removed expired slots before taking the units: the same hole."""
    quota = QuotaStore(client)
    with full(server):
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            await quota.take("acme", 1000, units=2, slot=WorkSlot("this-request", 32))
    assert await quota.quota_used("acme") == 0 and await quota.in_flight("acme") == 0


async def test_a_unit_taken_before_the_store_filled_is_given_back_on_a_full_store(server, client):
    """A request admitted just before the store filled and failed after (its review item refused: 503) is not
    charged: giving a unit back never grows the store, so it is let through."""
    quota = QuotaStore(client)
    assert await quota.take("acme", 1000) is Taken.TAKEN
    with full(server):
        await quota.give_back_quota("acme")
    assert await quota.quota_used("acme") == 0
