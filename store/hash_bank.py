"""Per-account banks of PDQ hashes of rejected images, and the match that blocks their re-uploads.

A moderator's rejection of an image review item puts the item's PDQ hash in its account's bank (in the decision's
own Lua step: store/lua_outbox.py, `bank_rejected_image`); an operator may also import hashes (HMA's CSV,
store/hash_bank_csv.py) or remove one. A later image of the same account whose hash has quality >= `min_quality`
and lies within `match_distance` bits (of 256) of a banked hash is blocked (`blocked_by: ["hash_match"]`).

Matching is a brute-force scan over the bank packed as four uint64 words per hash: XOR and a popcount per word
(numpy's bitwise_count), then the nearest. Each replica keeps a copy per account, read again only when the bank's
version counter (bumped by every change) moved: one GET per image otherwise. docs/hash-bank.md has the figures.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from redis.asyncio import Redis

from models.pdq import hamming_distances, pack_hashes
from store import redis_keys

HEX_CHARS = 64
_WRITE_BATCH = 5_000  # hashes per transaction of an import: no single step holds the store for long


@dataclass(frozen=True)
class HashBankRules:
    # PDQ's usual match threshold (ThreatExchange, HMA): at most 31 of 256 bits apart.
    match_distance: int = 31
    # Below this quality a PDQ hash is not trusted (flat or featureless images hash alike): neither banked nor matched.
    min_quality: int = 50
    # Banks of this many accounts are kept in each replica's memory (least recently used ones are dropped).
    cached_accounts: int = 64


@dataclass(frozen=True)
class BankMatch:
    hash: str  # the banked hash that matched
    review_id: int | None  # the rejected item it came from (None: imported)
    distance: int


@dataclass(frozen=True)
class BankEntry:
    hash: str
    review_id: int | None
    added_at: float


class PackedBank:
    """A bank as arrays: 32 bytes of hash and 8 of review id per entry (40 MB a million), no Python object each."""

    def __init__(self, entries: list[BankEntry]):
        self.packed = pack_hashes([e.hash for e in entries])
        self.review_ids = np.array([-1 if e.review_id is None else e.review_id for e in entries], dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.review_ids.nbytes

    def nearest(self, query: str, max_distance: int) -> BankMatch | None:
        if not len(self.packed):
            return None
        found = hamming_distances(self.packed, query)
        index = int(np.argmin(found))
        if found[index] > max_distance:
            return None
        review_id = int(self.review_ids[index])
        banked = self.packed[index].astype(">u8").tobytes().hex()
        return BankMatch(hash=banked, review_id=None if review_id < 0 else review_id, distance=int(found[index]))


def _entry(pdq: str, raw: str) -> BankEntry:
    fields = json.loads(raw)
    return BankEntry(hash=pdq, review_id=fields.get("review_id"), added_at=float(fields.get("added_at", 0)))


class HashBank:
    def __init__(self, redis: Redis, rules: HashBankRules | None = None):
        self._redis = redis
        self.rules = rules or HashBankRules()
        self._cache: OrderedDict[str, tuple[str, PackedBank]] = OrderedDict()

    async def match(self, account: str, pdq: str, mirrored: str | None = None) -> BankMatch | None:
        """The nearest banked hash within the match distance of `pdq` or of `mirrored` (the hash of the image's
        left-right mirror, models/pdq.py), or None."""
        version = await self._redis.get(redis_keys.hash_bank_version(account))
        if version is None:
            return None  # never banked anything: the common case costs this one GET
        cached = self._cache.get(account)
        if cached is None or cached[0] != version:
            cached = (version, PackedBank(await self.entries(account)))
            self._cache[account] = cached
        self._cache.move_to_end(account)
        while len(self._cache) > self.rules.cached_accounts:
            self._cache.popitem(last=False)
        found = [cached[1].nearest(query, self.rules.match_distance) for query in (pdq, mirrored) if query]
        found = [match for match in found if match is not None]
        return min(found, key=lambda match: match.distance) if found else None

    async def entries(self, account: str) -> list[BankEntry]:
        raw = await self._redis.hgetall(redis_keys.hash_bank(account))
        return sorted((_entry(pdq, value) for pdq, value in raw.items()), key=lambda e: (e.added_at, e.hash))

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
