"""First start: seed plans and profiles from `config/`, create a key if there is none."""

from __future__ import annotations

from pathlib import Path

import yaml

from redis.asyncio import Redis

from store.keys.config import ConfigStore
from policy.types import Plan, Profile
from runtime.settings import Settings


def load_plans(config_dir: Path) -> list[Plan]:
    raw = yaml.safe_load((config_dir / "plans.yaml").read_text()) or {}
    return [Plan(name=name, **fields) for name, fields in raw.items()]


def load_profiles(config_dir: Path) -> list[Profile]:
    raw = yaml.safe_load((config_dir / "profiles.yaml").read_text()) or {}
    return [Profile(name=name, **fields) for name, fields in raw.items()]


async def seed_config(config: ConfigStore, config_dir: Path) -> None:
    """Adds the plans and profiles the store lacks; admin edits already there are kept."""
    await config.seed(load_plans(config_dir), load_profiles(config_dir))


async def create_first_key(config: ConfigStore, *, plan: str, profile: str) -> str | None:
    """The secret of a new key when the store has no live key, else None."""
    if await config.count_keys() > 0:
        return None
    _, secret = await config.create_key("default", profile, plan)
    return secret


async def prepare_store(settings: Settings, redis_url: str) -> str | None:
    """Seed the store and create the first key if it has none: the secret of that key, else None."""
    redis = Redis.from_url(redis_url, decode_responses=True)
    try:
        config = ConfigStore(redis)
        await seed_config(config, settings.config_dir)
        return await create_first_key(config, plan=settings.default_plan, profile=settings.default_profile)
    finally:
        await redis.aclose()
