"""Per-account banks of PDQ hashes of rejected images, and the match that blocks their re-uploads.

A moderator's rejection of an image review item puts the item's PDQ hash in its account's bank (in the decision's
own Lua step: store/lua_outbox.py, `bank_rejected_image`); an operator may also import hashes (HMA's CSV,
store/hash_bank_csv.py) or remove one. A later image of the same account whose hash has quality >= `min_quality`
and lies within `match_distance` bits (of 256) of a banked hash is blocked (`blocked_by: ["hash_match"]`).

Matching is a brute-force scan over the bank packed as four uint64 words per hash: XOR and a popcount per word
(numpy's bitwise_count), then the nearest, in a thread. Each replica keeps a copy per account, read again only when
the bank's version counter (bumped by every change) moved: one GET per image otherwise. A reload reads the bank in
chunks and builds the new copy in a thread, then swaps it in, so that neither a large bank's reload nor its scan holds
the ingress event loop (every other request waits on that loop). docs/hash-bank.md has the figures.
"""

from __future__ import annotations

import asyncio
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
_READ_CHUNK = 500  # entries per HSCAN step when a replica reads a bank again


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

    @classmethod
    def from_stored(cls, raw: dict[str, str]) -> PackedBank:
        """From the bank's hash as stored (PDQ hex -> JSON): a replica's copy, built in a thread."""
        return cls([_entry(pdq, value) for pdq, value in raw.items()])

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.review_ids.nbytes

    def nearest_of(self, queries: list[str], max_distance: int) -> BankMatch | None:
        """The nearest match of any of `queries` (an image's hash and its mirror's)."""
        found = [match for match in (self.nearest(query, max_distance) for query in queries) if match is not None]
        return min(found, key=lambda match: match.distance) if found else None

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
        self._reloads: dict[str, asyncio.Task] = {}  # the one reload under way per account

    async def match(self, account: str, pdq: str, mirrored: str | None = None) -> BankMatch | None:
        """The nearest banked hash within the match distance of `pdq` or of `mirrored` (the hash of the image's
        left-right mirror, models/pdq.py), or None. The scan runs in a thread, off the event loop."""
        version = await self._redis.get(redis_keys.hash_bank_version(account))
        if version is None:
            return None  # never banked anything: the common case costs this one GET
        cached = self._cache.get(account)
        bank = cached[1] if cached is not None and cached[0] == version else await self._reloaded(account)
        self._cache.move_to_end(account)
        while len(self._cache) > self.rules.cached_accounts:
            self._cache.popitem(last=False)
        queries = [query for query in (pdq, mirrored) if query]
        return await asyncio.to_thread(bank.nearest_of, queries, self.rules.match_distance)

    async def _reloaded(self, account: str) -> PackedBank:
        """The account's bank read again. One reload per account at a time: the matches that find the copy stale
        meanwhile wait for that one, not for one each; the old copy stays in place until the new one is built."""
        reload = self._reloads.get(account)
        if reload is None:
            reload = asyncio.create_task(self._reload(account))
            self._reloads[account] = reload
            reload.add_done_callback(lambda _: self._reloads.pop(account, None))
        return await asyncio.shield(reload)

    async def _reload(self, account: str) -> PackedBank:
        # The version first: a change made while the entries are read moves it again, so the next match reloads.
        version = await self._redis.get(redis_keys.hash_bank_version(account))
        raw: dict[str, str] = {}
        # In chunks (HSCAN), not one HGETALL: parsing a 100,000-entry reply would hold the event loop for itself.
        async for pdq, value in self._redis.hscan_iter(redis_keys.hash_bank(account), count=_READ_CHUNK):
            raw[pdq] = value
        bank = await asyncio.to_thread(PackedBank.from_stored, raw)  # JSON and numpy: off the event loop
        self._cache[account] = (version or "0", bank)
        return bank

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
