"""Per-account banks of PDQ hashes of rejected images, as the store keeps them.

A moderator's rejection of an image review item puts the item's PDQ hash in its account's bank (in the decision's
own Lua step: DECIDE_REVIEW_ITEM runs `BANK_REJECTED_HASH` of store/hash_bank/lua.py); an operator may also import
hashes (HMA's CSV, store/hash_bank/csv_format.py) or remove one. Every change bumps the account's version counter,
which tells each replica's in-memory copy (moderation/hash_matching.py, where the matching lives) to read the bank
again.
docs/hash-bank.md has the figures.

An account's bank holds at most `max_entries` hashes (about 150 bytes each in the store), checked in the very step
that adds (store/hash_bank/lua.py): an import that would pass it adds nothing (`BankFull`); a rejection past it
banks nothing, counted in `mod:hashbank:skipped:{account}` (and logged by the review queue), and the decision stands.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from store import redis_keys
from store.hash_bank import lua

HEX_CHARS = 64
# Hashes one account's bank may hold: about 15 MB of the store, 4 MB in each ingress replica that matches against it,
# 2.4 to 2.8 ms a match (docs/hash-bank.md). Larger imported banks: raise MODERATION_HASH_BANK_MAX_PER_ACCOUNT.
MAX_ENTRIES_PER_ACCOUNT = 100_000
_WRITE_BATCH = 5_000  # hashes per transaction of an import: no single step holds the store for long
_READ_CHUNK = 500  # entries per HSCAN step when a replica reads a bank again


class BankFull(Exception):
    """An import would take the account's bank past its cap; nothing of it was added (but `added`, the hashes a step
    had added before a rejection took the last room)."""

    def __init__(self, count: int, max_entries: int, new: int, added: int = 0):
        super().__init__(
            f"The account's hash bank holds {count} of its {max_entries} hashes; this import has {new} new ones"
            + (f" and added {added} before the bank filled." if added else ", so none was added.")
            + " Remove hashes, or raise MODERATION_HASH_BANK_MAX_PER_ACCOUNT."
        )
        self.count, self.max_entries, self.new, self.added = count, max_entries, new, added


@dataclass(frozen=True)
class BankEntry:
    hash: str
    review_id: int | None
    added_at: float


def entry_of(pdq: str, raw: str) -> BankEntry:
    """An entry from its stored form (the PDQ hex is the field, the value JSON)."""
    fields = json.loads(raw)
    return BankEntry(hash=pdq, review_id=fields.get("review_id"), added_at=float(fields.get("added_at", 0)))


def _first_of_each(hashes: list[tuple[str, int | None]]) -> dict[str, int | None]:
    """Each hash once, with its first review id: a hash repeated in one import takes one place."""
    first: dict[str, int | None] = {}
    for pdq, review_id in hashes:
        first.setdefault(pdq, review_id)
    return first


def decision_args(max_entries: int) -> list:
    """The arguments of BANK_REJECTED_HASH in the deciding script (store/hash_bank/lua.py)."""
    return [redis_keys.HASH_BANK_PREFIX, redis_keys.HASH_BANK_VERSION_PREFIX, redis_keys.HASH_BANK_SKIPPED_PREFIX,
            max_entries]  # fmt: skip


class HashBank:
    def __init__(self, redis: Redis, max_entries: int = MAX_ENTRIES_PER_ACCOUNT):
        self._redis, self.max_entries = redis, max_entries
        self._add = redis.register_script(lua.ADD_HASHES)

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

    async def skipped(self, account: str) -> int:
        """Rejected images not banked because the bank was full."""
        return int(await self._redis.get(redis_keys.hash_bank_skipped(account)) or 0)

    async def add_many(
        self, account: str, hashes: list[tuple[str, int | None]], now: float | None = None, *,
        keep_existing: bool = False,
    ) -> int:
        """Adds (hash, review id) pairs, replacing an entry of the same hash unless `keep_existing`; returns how many
        were new. Raises BankFull, adding nothing, when the new ones would take the bank past `max_entries`. In
        batches, each checked against the cap and bumping the version that tells the replicas to read the bank again."""
        now = time.time() if now is None else now
        hashes = list(_first_of_each(hashes).items())
        new = await self._new_of(account, [pdq for pdq, _ in hashes])
        count = await self.count(account)
        if count + new > self.max_entries:
            raise BankFull(count, self.max_entries, new)
        keys = [redis_keys.hash_bank(account), redis_keys.hash_bank_version(account)]
        added = 0
        for start in range(0, len(hashes), _WRITE_BATCH):
            pairs = [part for pdq, review_id in hashes[start : start + _WRITE_BATCH]
                     for part in (pdq, json.dumps({"review_id": review_id, "added_at": now}))]  # fmt: skip
            step = int(await self._add(keys=keys, args=[self.max_entries, int(keep_existing), *pairs]))
            if step < 0:  # rejections took the room meanwhile
                raise BankFull(await self.count(account), self.max_entries, new, added)
            added += step
        return added

    async def _new_of(self, account: str, hashes: list[str]) -> int:
        """How many of `hashes` the bank does not hold yet (read in batches)."""
        new = 0
        for start in range(0, len(hashes), _WRITE_BATCH):
            held = await self._redis.hmget(redis_keys.hash_bank(account), hashes[start : start + _WRITE_BATCH])
            new += sum(value is None for value in held)
        return new

    async def remove(self, account: str, pdq: str) -> bool:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hdel(redis_keys.hash_bank(account), pdq)
            pipe.incr(redis_keys.hash_bank_version(account))
            removed, _ = await pipe.execute()
        return bool(removed)
