"""Per-account banks of PDQ hashes of rejected images, as the store keeps them.

A moderator's rejection of an image review item puts the item's PDQ hash in its account's bank (in the decision's
own Lua step: store/webhooks/lua.py, `bank_rejected_image`); an operator may also import hashes (HMA's CSV,
store/hash_bank/csv_format.py) or remove one. Every change bumps the account's version counter, which tells each
replica's in-memory copy (moderation/hash_matching.py, where the matching lives) to read the bank again.
docs/hash-bank.md has the figures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys

HEX_CHARS = 64
_WRITE_BATCH = 5_000  # hashes per transaction of an import: no single step holds the store for long
_READ_CHUNK = 500  # entries per HSCAN step when a replica reads a bank again


@dataclass(frozen=True)
class BankEntry:
    hash: str
    review_id: int | None
    added_at: float


def entry_of(pdq: str, raw: str) -> BankEntry:
    """An entry from its stored form (the PDQ hex is the field, the value JSON)."""
    fields = json.loads(raw)
    return BankEntry(hash=pdq, review_id=fields.get("review_id"), added_at=float(fields.get("added_at", 0)))


class HashBank:
    def __init__(self, redis: Redis):
        self._redis = redis

    async def version(self, account: str) -> str | None:
        """The bank's change counter, None when the account never banked anything."""
        return await self._redis.get(redis_keys.hash_bank_version(account))

    async def stored(self, account: str) -> dict[str, str]:
        """The bank as stored (PDQ hex -> JSON), read in chunks (HSCAN), not one HGETALL: parsing a 100,000-entry
        reply would hold the event loop for itself."""
        raw: dict[str, str] = {}
        async for pdq, value in self._redis.hscan_iter(redis_keys.hash_bank(account), count=_READ_CHUNK):
            raw[pdq] = value
        return raw

    async def entries(self, account: str) -> list[BankEntry]:
        raw = await self._redis.hgetall(redis_keys.hash_bank(account))
        return sorted((entry_of(pdq, value) for pdq, value in raw.items()), key=lambda e: (e.added_at, e.hash))

    async def count(self, account: str) -> int:
        return await self._redis.hlen(redis_keys.hash_bank(account))

    async def add_many(
        self, account: str, hashes: list[tuple[str, int | None]], now: float | None = None, *,
        keep_existing: bool = False,
    ) -> int:
        """Adds (hash, review id) pairs, replacing an entry of the same hash unless `keep_existing`; returns how many
        were new. In batches, each with the version bump that tells the replicas to read the bank again."""
        now = time.time() if now is None else now
        added = 0
        for start in range(0, len(hashes), _WRITE_BATCH):
            async with self._redis.pipeline(transaction=True) as pipe:
                for pdq, review_id in hashes[start : start + _WRITE_BATCH]:
                    value = json.dumps({"review_id": review_id, "added_at": now})
                    (pipe.hsetnx if keep_existing else pipe.hset)(redis_keys.hash_bank(account), pdq, value)
                pipe.incr(redis_keys.hash_bank_version(account))
                added += sum(int(n) for n in (await pipe.execute())[:-1])
        return added

    async def remove(self, account: str, pdq: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(redis_keys.hash_bank(account), pdq)
            pipe.incr(redis_keys.hash_bank_version(account))
            removed, _ = await pipe.execute()
        return bool(removed)
