"""Keys, plans and profiles in Redis (README: Keys, plans, profiles and limits)."""

from __future__ import annotations

import hashlib
import re

import pytest

from store.keys.config import ConfigStore
from policy.types import ApiKey, CategoryThresholds, Plan, Profile

pytestmark = pytest.mark.anyio


def _plan(name: str = "starter", quota: int = 1000) -> Plan:
    return Plan(name=name, scope="both", monthly_quota=quota, rate_per_second=5, burst=10)


def _profile(name: str = "default", mode: str = "enforce") -> Profile:
    return Profile(
        name=name,
        mode=mode,
        categories={
            "nsfw": CategoryThresholds(review=0.5, block=0.8),
            "toxic": CategoryThresholds(review=0.6, block=0.9),
        },
    )


async def _key_opened_by(store: ConfigStore, secret: str) -> ApiKey | None:
    """The key record `secret` opens, found as every request finds it (`authorize`), or None."""
    authorization = await store.authorize(secret)
    return authorization.key if authorization is not None else None


async def _everything_stored(redis_client) -> str:
    """Every key name and every value in the database, as one text to search in."""
    parts = []
    async for key in redis_client.scan_iter():
        parts.append(key)
        kind = await redis_client.type(key)
        if kind == "string":
            parts.append(await redis_client.get(key))
        elif kind == "hash":
            parts.extend(f"{k}={v}" for k, v in (await redis_client.hgetall(key)).items())
        elif kind == "set":
            parts.extend(await redis_client.smembers(key))
        elif kind == "zset":
            parts.extend(await redis_client.zrange(key, 0, -1))
        elif kind == "list":
            parts.extend(await redis_client.lrange(key, 0, -1))
        else:
            raise AssertionError(f"unexpected Redis type {kind} at {key}")
    return "\n".join(parts)


async def test_keys_are_stored_hashed_never_in_clear(redis_client):
    _, secret = await ConfigStore(redis_client).create_key("acme", "default", "starter")
    stored = await _everything_stored(redis_client)
    assert secret not in stored
    assert secret.removeprefix("mod_") not in stored
    # The scan did see the key's data: its hash is there.
    assert hashlib.sha256(secret.encode()).hexdigest() in stored


async def test_a_created_key_is_opened_by_its_secret(redis_client):
    store = ConfigStore(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    assert await _key_opened_by(store, secret) == record
    assert (record.account, record.profile, record.plan, record.revoked) == ("acme", "default", "starter", False)


async def test_key_ids_and_secrets_have_their_documented_shape(redis_client):
    record, secret = await ConfigStore(redis_client).create_key("acme", "default", "starter")
    assert re.fullmatch(r"key_[0-9a-f]{32}", record.id)
    assert re.fullmatch(r"mod_[A-Za-z0-9_-]{43}", secret)


async def test_a_revoked_key_is_opened_by_nothing_and_kept_as_revoked(redis_client):
    store = ConfigStore(redis_client)
    record, secret = await store.create_key("acme", "default", "starter")
    assert await store.revoke_key(record.id) is True
    assert await _key_opened_by(store, secret) is None
    assert (await store.get_key(record.id)).revoked is True


async def test_revoking_an_unknown_key_returns_false(redis_client):
    assert await ConfigStore(redis_client).revoke_key("key_000000000000") is False


async def test_count_keys_counts_only_live_keys(redis_client):
    store = ConfigStore(redis_client)
    first, _ = await store.create_key("acme", "default", "starter")
    await store.create_key("acme", "default", "starter")
    await store.create_key("other", "default", "starter")
    await store.revoke_key(first.id)
    assert await store.count_keys() == 2


async def test_plans_and_profiles_read_back_as_written(redis_client):
    store = ConfigStore(redis_client)
    await store.put_plan(_plan())
    await store.put_profile(_profile())
    assert await store.get_plan("starter") == _plan()
    assert await store.get_profile("default") == _profile()
    assert await store.get_plan("missing") is None
    assert await store.get_profile("missing") is None


async def test_a_plan_or_profile_without_a_name_is_refused(redis_client):
    store = ConfigStore(redis_client)
    with pytest.raises(ValueError):
        await store.put_plan(_plan(name=""))
    with pytest.raises(ValueError):
        await store.put_profile(_profile(name=""))


async def test_seed_keeps_admin_edits(redis_client):
    store = ConfigStore(redis_client)
    await store.seed([_plan(quota=1000)], [_profile(mode="enforce")])
    await store.put_plan(_plan(quota=5))
    await store.put_profile(_profile(mode="monitor"))
    await store.seed([_plan(quota=1000)], [_profile(mode="enforce")])
    assert (await store.get_plan("starter")).monthly_quota == 5
    assert (await store.get_profile("default")).mode == "monitor"


async def test_seed_writes_what_is_missing(redis_client):
    store = ConfigStore(redis_client)
    await store.seed([_plan("starter")], [_profile("default")])
    await store.seed([_plan("starter"), _plan("pro")], [_profile("default"), _profile("strict")])
    assert await store.get_plan("pro") == _plan("pro")
    assert await store.get_profile("strict") == _profile("strict")


async def test_a_key_id_that_is_taken_is_never_overwritten(redis_client, monkeypatch):
    """SET NX: were a 128-bit id ever drawn twice, the second key gets a fresh id instead."""
    store = ConfigStore(redis_client)
    first, first_secret = await store.create_key("acme", "default", "starter")
    draws = iter([first.id.removeprefix("key_"), "ab" * 16])
    monkeypatch.setattr("store.keys.config.secrets.token_hex", lambda n: next(draws))
    second, second_secret = await store.create_key("other", "default", "starter")
    assert second.id == "key_" + "ab" * 16
    assert await _key_opened_by(store, first_secret) == first
    assert await _key_opened_by(store, second_secret) == second
    assert await store.count_keys() == 2


async def test_key_creation_gives_up_rather_than_overwrite(redis_client, monkeypatch):
    store = ConfigStore(redis_client)
    first, _ = await store.create_key("acme", "default", "starter")
    monkeypatch.setattr("store.keys.config.secrets.token_hex", lambda n: first.id.removeprefix("key_"))
    with pytest.raises(RuntimeError):
        await store.create_key("other", "default", "starter")
    assert await store.get_key(first.id) == first and await store.count_keys() == 1
