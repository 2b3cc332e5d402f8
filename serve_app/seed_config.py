"""Read the seed plans and profiles of `config/` into policy records."""

from __future__ import annotations

from pathlib import Path

import yaml

from policy.types import Plan, Profile


def load_plans(config_dir: Path) -> list[Plan]:
    raw = yaml.safe_load((config_dir / "plans.yaml").read_text()) or {}
    return [Plan(name=name, **fields) for name, fields in raw.items()]


def load_profiles(config_dir: Path) -> list[Profile]:
    raw = yaml.safe_load((config_dir / "profiles.yaml").read_text()) or {}
    return [Profile(name=name, **fields) for name, fields in raw.items()]
