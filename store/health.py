"""What the health check asks the store: does it take a write, and how much memory does it use.

A write, not a PING: a store that is full (`maxmemory`, no eviction), read-only (a replica, a failed
disk) or gone refuses every write, the rate token of every authenticated request included, while it
may still answer reads. The probe key is the caller's own and expires seconds later, so probes never
accumulate. Used memory comes from MEMORY STATS, which the service's ACL user may run (INFO is
@dangerous, refused to it); the limit it is compared with is a setting (docs/operating.md).
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from store import redis_keys

PROBE_TTL_MS = 30_000


async def probe_writes(redis: Redis, name: str) -> None:
    """One small write that expires; raises the store's RedisError when it refuses writes."""
    await redis.set(redis_keys.health_probe(name), repr(time.time()), px=PROBE_TTL_MS)


async def used_memory(redis: Redis) -> int:
    """Bytes the store has allocated (`used_memory` of INFO)."""
    stats = await redis.execute_command("MEMORY", "STATS")
    if isinstance(stats, list):  # RESP2 without a parser for it: alternating names and values
        stats = dict(zip(stats[::2], stats[1::2]))
    return int(stats["total.allocated"])
