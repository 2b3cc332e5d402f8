"""First start: config seeding and the one key created when the store has none."""

from __future__ import annotations

import pytest

from store.keys.config import Authorized, ConfigStore
from runtime.bootstrap import create_first_key, seed_config
from runtime.settings import PROJECT_ROOT

pytestmark = pytest.mark.anyio
CONFIG_DIR = PROJECT_ROOT / "config"


async def test_first_start_seeds_every_plan_and_profile_of_config(redis_client):
    store = ConfigStore(redis_client)
    await seed_config(store, CONFIG_DIR)
    for name in ("default", "images-only", "text-only"):
        assert await store.get_plan(name) is not None
    for name in ("default", "monitor", "strict"):
        assert await store.get_profile(name) is not None


async def test_first_start_creates_one_working_key_and_later_starts_none(redis_client):
    store = ConfigStore(redis_client)
    await seed_config(store, CONFIG_DIR)
    secret = await create_first_key(store, plan="default", profile="default")
    authorized = await store.authorize(secret)
    assert isinstance(authorized, Authorized)
    assert (authorized.key.plan, authorized.key.profile) == ("default", "default")
    assert await create_first_key(store, plan="default", profile="default") is None
    assert await store.count_keys() == 1


async def test_default_plan_has_the_design_limits(redis_client):
    store = ConfigStore(redis_client)
    await seed_config(store, CONFIG_DIR)
    plan = await store.get_plan("default")
    assert (plan.image_max_bytes, plan.image_max_pixels, plan.text_max_chars) == (10 * 1024 * 1024, 40_000_000, 20_000)
    assert (await store.get_profile("default")).report_threshold == 3


async def test_prepare_store_seeds_and_creates_the_first_key_once(redis_url, redis_client):
    from types import SimpleNamespace

    from runtime.bootstrap import prepare_store

    settings = SimpleNamespace(config_dir=CONFIG_DIR, default_plan="default", default_profile="default")
    first = await prepare_store(settings, redis_url)
    assert first and isinstance(await ConfigStore(redis_client).authorize(first), Authorized)
    assert await prepare_store(settings, redis_url) is None
