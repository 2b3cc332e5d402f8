"""Lists of what the config store holds, for the operators' dashboard pages: plans, profiles, live keys.

`store.keys.config.ConfigStore` reads and writes one record by name; these walk the store (SCAN, bounded) so an operator
can see every record without knowing its name. Read only.
"""

from __future__ import annotations

from redis.asyncio import Redis

from store import redis_keys
from store.keys.config import UnreadableRecord, read_record
from policy.types import ApiKey, Plan, Profile

# Plans and profiles are a handful; keys a few thousand at most in a self-hosted install. The lists stop here.
MAX_LISTED = 5_000


async def _named(redis: Redis, prefix: str) -> list[str]:
    names: list[str] = []
    async for key in redis.scan_iter(match=f"{prefix}*", count=500):
        names.append(key[len(prefix):])
        if len(names) >= MAX_LISTED:
            break
    return sorted(names)


async def _readable(redis: Redis, model: type, prefix: str) -> list:
    """Every stored record of `prefix` that can be read; one that cannot is logged (store.keys.config.read_record) and
    left out, so that one bad record never takes the page down."""
    names = await _named(redis, prefix)
    rows = await redis.mget([prefix + name for name in names]) if names else []
    records = []
    for name, raw in zip(names, rows):
        if raw is None:
            continue
        try:
            records.append(read_record(model, name, raw))
        except UnreadableRecord:
            pass  # logged by read_record
    return records


async def list_plans(redis: Redis) -> list[Plan]:
    return await _readable(redis, Plan, redis_keys.PLAN_PREFIX)


async def list_profiles(redis: Redis) -> list[Profile]:
    return await _readable(redis, Profile, redis_keys.PROFILE_PREFIX)


async def list_live_keys(redis: Redis) -> list[ApiKey]:
    """The keys that are not revoked, newest first (never a secret: only the records)."""
    ids = sorted(await redis.smembers(redis_keys.live_api_keys()))[:MAX_LISTED]
    rows = await redis.mget([redis_keys.api_key(key_id) for key_id in ids]) if ids else []
    keys = [ApiKey.model_validate_json(raw) for raw in rows if raw is not None]
    return sorted(keys, key=lambda key: -key.created_at)
