"""A request's key, plan, profile and rate token in one round trip (`ConfigStore.authorize`)."""

from __future__ import annotations

import hashlib
import time

import pytest
from redis.asyncio.connection import AbstractConnection

from store import redis_keys
from store.keys.config import Authorized, ConfigStore, Unconfigured
from store.keys.quota import QuotaStore, Taken, WorkSlot
from policy.types import CategoryThresholds, Plan, Profile

pytestmark = pytest.mark.anyio


def _plan(rate_per_second: float = 5, burst: int = 10) -> Plan:
    return Plan(name="starter", scope="both", monthly_quota=1000, rate_per_second=rate_per_second, burst=burst)


def _profile(mode: str = "enforce") -> Profile:
    return Profile(
        name="default",
        mode=mode,
        categories={
            "nsfw": CategoryThresholds(review=0.5, block=0.8),
            "toxic": CategoryThresholds(review=0.6, block=0.9),
        },
    )


async def _configured_store(redis_client, plan: Plan | None = None) -> ConfigStore:
    store = ConfigStore(redis_client)
    await store.put_plan(plan or _plan())
    await store.put_profile(_profile())
    return store


async def _rate_buckets(redis_client) -> list[str]:
    return [key async for key in redis_client.scan_iter(match=redis_keys.RATE_BUCKET_PREFIX + "*")]


def _record_sent_commands(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write to the server from now on, as its bytes: one write is one round trip (no pipelining here)."""
    sent: list[bytes] = []
    send = AbstractConnection.send_packed_command

    async def recording_send(self, command, check_health=True):
        sent.append(command if isinstance(command, bytes) else b"".join(command))
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording_send)
    return sent


async def test_a_live_key_is_admitted_with_its_plan_and_profile(redis_client):
    store = await _configured_store(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    assert await store.authorize(secret) == Authorized(key=record, plan=_plan(), profile=_profile(), retry_after_s=0.0)
    assert await _rate_buckets(redis_client) == [redis_keys.RATE_BUCKET_PREFIX + record.id]


async def test_an_unknown_secret_is_refused_and_takes_no_token(redis_client):
    store = await _configured_store(redis_client)
    _, secret = await store.create_key("acme", "default", "starter")
    assert await store.authorize(secret + "x") is None
    assert await store.authorize("") is None
    assert await _rate_buckets(redis_client) == []


async def test_a_revoked_key_is_refused_and_takes_no_token(redis_client):
    store = await _configured_store(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    await store.revoke_key(record.id)
    assert await store.authorize(secret) is None
    assert await _rate_buckets(redis_client) == []


async def test_a_key_whose_record_is_gone_is_refused(redis_client):
    store = await _configured_store(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    await redis_client.delete(redis_keys.api_key(record.id))
    assert await store.authorize(secret) is None
    assert await _rate_buckets(redis_client) == []


@pytest.mark.parametrize("missing", [redis_keys.plan("starter"), redis_keys.profile("default")])
async def test_a_key_without_its_plan_or_profile_is_unconfigured_and_takes_no_token(redis_client, missing):
    store = await _configured_store(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    await redis_client.delete(missing)
    assert await store.authorize(secret) == Unconfigured(key=record)
    assert await _rate_buckets(redis_client) == []


async def test_past_the_burst_a_key_is_refused_and_told_when_to_retry(redis_client):
    store = await _configured_store(redis_client, _plan(rate_per_second=2, burst=3))
    _, secret = await store.create_key("acme", "default", "starter")
    now = 1000.0
    assert [(await store.authorize(secret, now=now)).retry_after_s for _ in range(3)] == [0.0, 0.0, 0.0]
    wait_s = (await store.authorize(secret, now=now + 0.1)).retry_after_s
    assert wait_s == pytest.approx(0.4)
    # A refused take spends nothing: asked again at the same time, the bucket answers the same wait.
    assert (await store.authorize(secret, now=now + 0.1)).retry_after_s == wait_s
    assert (await store.authorize(secret, now=now + 0.1 + wait_s - 0.01)).retry_after_s > 0
    assert (await store.authorize(secret, now=now + 0.1 + wait_s)).retry_after_s == 0.0


async def test_the_bucket_refills_no_further_than_the_burst(redis_client):
    store = await _configured_store(redis_client, _plan(rate_per_second=1, burst=2))
    _, secret = await store.create_key("acme", "default", "starter")
    await store.authorize(secret, now=1000.0)
    admitted = [(await store.authorize(secret, now=5000.0)).retry_after_s == 0.0 for _ in range(3)]
    assert admitted == [True, True, False]


async def test_rate_buckets_are_per_key_not_per_account(redis_client):
    store = await _configured_store(redis_client, _plan(rate_per_second=1, burst=1))
    (_, first), (_, second) = [await store.create_key("acme", "default", "starter") for _ in range(2)]
    assert (await store.authorize(first, now=1000.0)).retry_after_s == 0.0
    assert (await store.authorize(first, now=1000.0)).retry_after_s > 0
    assert (await store.authorize(second, now=1000.0)).retry_after_s == 0.0


async def test_a_rate_bucket_expires_once_idle_long_enough_to_be_full(redis_client):
    store = await _configured_store(redis_client, _plan(rate_per_second=2, burst=10))
    record, secret = await store.create_key("acme", "default", "starter")
    await store.authorize(secret, now=1000.0)
    ttl_ms = await redis_client.pttl(redis_keys.RATE_BUCKET_PREFIX + record.id)
    assert 5000 <= ttl_ms <= 6000


async def test_without_a_time_the_bucket_runs_on_redis_time(redis_client):
    store = await _configured_store(redis_client, _plan(rate_per_second=0.001, burst=1))
    _, secret = await store.create_key("acme", "default", "starter")
    assert (await store.authorize(secret)).retry_after_s == 0.0
    assert (await store.authorize(secret)).retry_after_s == pytest.approx(1000, abs=1)


async def test_admin_changes_hold_from_the_next_call(redis_client):
    """Nothing is cached between calls: a plan, a profile or a revoke changed in between is what the next call sees."""
    store = await _configured_store(redis_client, _plan(rate_per_second=0.001, burst=1))
    record, secret = await store.create_key("acme", "default", "starter")
    assert (await store.authorize(secret, now=1000.0)).retry_after_s == 0.0
    assert (await store.authorize(secret, now=1000.0)).retry_after_s > 0
    await store.put_plan(_plan(rate_per_second=1000, burst=1))
    await store.put_profile(_profile(mode="monitor"))
    authorized = await store.authorize(secret, now=1000.01)
    seen = (authorized.retry_after_s, authorized.plan.rate_per_second, authorized.profile.mode)
    assert seen == (0.0, 1000, "monitor")
    await store.revoke_key(record.id)
    assert await store.authorize(secret, now=1000.02) is None


@pytest.mark.parametrize("case", ["admitted", "rate_limited", "unknown", "unconfigured"])
async def test_authorizing_is_one_command_that_carries_the_hash_never_the_secret(redis_client, monkeypatch, case):
    store = await _configured_store(redis_client, _plan(rate_per_second=0.001, burst=1))
    _, secret = await store.create_key("acme", "default", "starter")
    await store.authorize("warm-up")  # the first call of a process may load the script first (NOSCRIPT)
    if case == "rate_limited":
        await store.authorize(secret)
    if case == "unconfigured":
        await redis_client.delete(redis_keys.plan("starter"))
    if case == "unknown":
        secret += "x"
    sent = _record_sent_commands(monkeypatch)
    await store.authorize(secret)
    assert len(sent) == 1
    assert b"\r\nEVALSHA\r\n" in sent[0]
    assert secret.encode() not in sent[0]
    assert hashlib.sha256(secret.encode()).hexdigest().encode() in sent[0]


async def _admitted(store: ConfigStore, limits: QuotaStore, secret: str, slot_id: str):
    return await store.authorize(secret, admission=limits.admission(slot_id, now=NOW))


NOW = time.time()


@pytest.mark.parametrize("case", ["admitted", "no_quota", "in_flight", "rate_limited"])
async def test_admitting_takes_the_first_unit_and_slot_in_the_same_one_command(redis_client, monkeypatch, case):
    quota = 0 if case == "no_quota" else 5
    plan = Plan(name="starter", scope="both", monthly_quota=quota, rate_per_second=0.001,
                burst=1 if case == "rate_limited" else 10, max_in_flight=1)  # fmt: skip
    store, limits = await _configured_store(redis_client, plan), QuotaStore(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    await store.authorize("warm-up")  # the first call of a process may load the script first (NOSCRIPT)
    if case in ("in_flight", "rate_limited"):
        assert (await _admitted(store, limits, secret, "first")).taken is Taken.TAKEN
    sent = _record_sent_commands(monkeypatch)
    found = await _admitted(store, limits, secret, "second")
    assert len(sent) == 1
    expected = {"admitted": Taken.TAKEN, "no_quota": Taken.NO_QUOTA, "in_flight": Taken.TOO_MANY_IN_FLIGHT,
                "rate_limited": None}[case]  # fmt: skip
    assert found.taken is expected
    used = await limits.quota_used("acme", now=NOW)
    assert used == {"admitted": 1, "no_quota": 0, "in_flight": 1, "rate_limited": 1}[case]
    slots = await redis_client.zrange(redis_keys.work_in_progress("acme"), 0, -1)
    assert slots == {"admitted": ["second"], "no_quota": [], "in_flight": ["first"], "rate_limited": ["first"]}[case]


async def test_an_admitting_step_gives_back_every_slot_released_before_it_whatever_its_account(redis_client):
    store, limits = await _configured_store(redis_client), QuotaStore(redis_client)
    _, acme = await store.create_key("acme", "default", "starter")
    _, globex = await store.create_key("globex", "default", "starter")
    for secret, slot_id in ((acme, "a1"), (globex, "g1")):
        assert (await _admitted(store, limits, secret, slot_id)).taken is Taken.TAKEN
    limits.release_slot("acme", WorkSlot("a1", 32))
    limits.release_slot("globex", WorkSlot("g1", 32))
    # No await between the releases and the step: only the step can have given them back.
    assert (await store.authorize("not a key", admission=limits.admission("x", now=NOW))) is None
    assert await limits.in_flight("acme") == 0 and await limits.in_flight("globex") == 0


async def test_a_plan_record_without_max_in_flight_is_admitted_apart(redis_client):
    # A plan written before max_in_flight existed: the step takes nothing and says so; the flow takes it instead.
    store, limits = await _configured_store(redis_client), QuotaStore(redis_client)
    _, secret = await store.create_key("acme", "default", "starter")
    await redis_client.set(redis_keys.plan("starter"), _plan().model_dump_json(exclude={"max_in_flight"}))
    found = await _admitted(store, limits, secret, "s")
    assert isinstance(found, Authorized) and found.taken is None and found.plan.max_in_flight == 32
    assert await limits.quota_used("acme", now=NOW) == 0
