"""The widget's state in the store (store/widget/tokens.py): a token's uses are taken atomically, a key holds at most
its cap of live tokens, the signing secret is one for every replica, a verdict's nonce is redeemed once, and origins
and their reverse index agree."""

from __future__ import annotations

import asyncio
import time

import pytest

from policy.types import CategoryThresholds, Plan, Profile
from store.keys.config import ConfigStore
from store.widget.tokens import FULL_RETRY_AFTER_MAX_S, TooManyLiveTokens, WidgetAdmitted, WidgetRefused, WidgetStore

pytestmark = pytest.mark.anyio
SITE = "https://comments.example"


async def _key_with_origins(redis_client, origins: list[str]) -> str:
    config = ConfigStore(redis_client)
    await config.put_plan(Plan(name="default", scope="both", monthly_quota=1000, rate_per_second=1000, burst=1000))
    await config.put_profile(Profile(name="default", mode="enforce", categories={
        "nsfw": CategoryThresholds(review=0.5, block=0.8), "toxic": CategoryThresholds(review=0.6, block=0.9)}))
    key, _ = await config.create_key("acme", "default", "default")
    await WidgetStore(redis_client).set_origins(key.id, origins)
    return key.id


async def test_concurrent_checks_never_spend_a_use_twice(redis_client):
    store = WidgetStore(redis_client)
    key_id = await _key_with_origins(redis_client, [SITE])
    token = await store.mint(key_id, minutes=5, uses=5)
    outcomes = await asyncio.gather(*(store.admit_check(token.secret, origin=SITE, address=f"10.0.0.{n}")
                                      for n in range(20)))  # fmt: skip
    assert sum(isinstance(o, WidgetAdmitted) for o in outcomes) == 5
    assert {o.reason for o in outcomes if isinstance(o, WidgetRefused)} == {"spent"}
    assert (await store.use(key_id))["checks"] == 5 and (await store.use(key_id))["refused_spent"] == 15


async def test_origins_and_the_preflights_index_change_together(redis_client):
    store = WidgetStore(redis_client)
    first = await _key_with_origins(redis_client, [SITE, "https://b.example"])
    second = await _key_with_origins(redis_client, ["https://b.example"])
    await store.set_origins(first, ["https://c.example"])
    assert await store.origins(first) == ["https://c.example"]
    assert not await store.some_key_allows(SITE)
    assert await store.some_key_allows("https://b.example")  # still the second key's
    await store.set_origins(second, [])
    assert not await store.some_key_allows("https://b.example")


async def test_every_replica_signs_with_the_same_secret(redis_client):
    secrets = await asyncio.gather(*(WidgetStore(redis_client).signing_secret() for _ in range(5)))
    assert len(set(secrets)) == 1 and len(secrets[0]) == 32


async def test_a_nonce_is_redeemed_once(redis_client):
    store = WidgetStore(redis_client)
    expires_at = (await redis_client.time())[0] + 60
    assert await store.redeem("n1", expires_at) and not await store.redeem("n1", expires_at)
    assert 0 < await redis_client.ttl("mod:widget:redeemed:n1") <= 61


async def test_a_key_holds_at_most_its_cap_of_live_tokens_and_a_refused_mint_writes_nothing(redis_client):
    store, now = WidgetStore(redis_client, live_tokens_per_key=3), time.time()
    for _ in range(3):
        await store.mint("key_a", minutes=30, uses=20, now=now)
    with pytest.raises(TooManyLiveTokens):
        await store.mint("key_a", minutes=30, uses=20, now=now)
    assert len([key async for key in redis_client.scan_iter("mod:widget:token:*")]) == 3
    assert (await store.use("key_a", now))["tokens"] == 3
    await store.mint("key_b", minutes=30, uses=20, now=now)  # the cap is per key


async def test_expired_tokens_drop_out_of_the_count(redis_client):
    store, now = WidgetStore(redis_client, live_tokens_per_key=2), time.time()
    await store.mint("key_a", minutes=1, uses=20, now=now)
    await store.mint("key_a", minutes=30, uses=20, now=now)
    with pytest.raises(TooManyLiveTokens):
        await store.mint("key_a", minutes=30, uses=20, now=now + 59)
    await store.mint("key_a", minutes=30, uses=20, now=now + 60)  # the 1-minute token has expired
    assert await redis_client.zcard("mod:widget:live:key_a") == 2


async def test_a_full_key_is_told_to_retry_when_its_oldest_live_token_expires_at_most_a_default_tokens_life(
        redis_client):  # fmt: skip
    store, now = WidgetStore(redis_client, live_tokens_per_key=2), time.time()
    await store.mint("key_a", minutes=10, uses=20, now=now)
    await store.mint("key_a", minutes=2, uses=20, now=now)
    with pytest.raises(TooManyLiveTokens) as refused:
        await store.mint("key_a", minutes=30, uses=20, now=now + 30)
    assert refused.value.retry_after_s == pytest.approx(2 * 60 - 30)
    long_lived = WidgetStore(redis_client, live_tokens_per_key=1)
    await long_lived.mint("key_b", minutes=24 * 60, uses=20, now=now)
    with pytest.raises(TooManyLiveTokens) as refused:
        await long_lived.mint("key_b", minutes=30, uses=20, now=now)
    assert refused.value.retry_after_s == FULL_RETRY_AFTER_MAX_S


async def test_concurrent_mints_never_pass_the_cap(redis_client):
    store = WidgetStore(redis_client, live_tokens_per_key=5)
    outcomes = await asyncio.gather(*(store.mint("key_a", minutes=30, uses=20) for _ in range(20)),
                                    return_exceptions=True)  # fmt: skip
    assert sum(not isinstance(o, Exception) for o in outcomes) == 5
    assert all(isinstance(o, TooManyLiveTokens) for o in outcomes if isinstance(o, Exception))


async def test_a_keys_live_set_expires_with_its_last_token(redis_client):
    store = WidgetStore(redis_client)
    await store.mint("key_a", minutes=30, uses=20)
    await store.mint("key_a", minutes=2, uses=20)
    assert 29 * 60 < await redis_client.ttl("mod:widget:live:key_a") <= 30 * 60 + 2
