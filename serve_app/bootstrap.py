"""First start: seed plans and profiles from `config/`, create a key if there is none."""

from __future__ import annotations

from pathlib import Path

from policy.store import ConfigStore
from serve_app.seed_config import load_plans, load_profiles


async def seed_config(config: ConfigStore, config_dir: Path) -> None:
    await config.seed(load_plans(config_dir), load_profiles(config_dir))


async def create_first_key(config: ConfigStore, *, plan: str, profile: str) -> str | None:
    """The secret of a new key when the store has no live key, else None."""
    if await config.count_keys() > 0:
        return None
    _, secret = await config.create_key("default", profile, plan)
    return secret
