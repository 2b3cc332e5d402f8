"""The match that blocks the re-upload of a rejected image, and its step in the moderation flow: an image of an
account whose PDQ hash has quality >= `min_quality` and lies within `match_distance` bits (of 256) of a hash in the
account's bank (store/hash_bank/bank.py) is blocked (`blocked_by: ["hash_match"]`).

The step (`hash_checked`) runs beside the models, after them: the PDQ hash comes with the ImageModel's answer
(models/image_upload.py), so the bank is checked once the image is scored, and a match overrides the profile's
decision (policy/decisions.py `blocked_by_hash`). Only a hash of quality `min_quality` or more is matched or kept
with a review item (`bankable_hash`).

Matching is a brute-force scan over the bank packed as four uint64 words per hash: XOR and a popcount per word
(numpy's bitwise_count, models/pdq.py), then the nearest, in a thread. Each replica keeps a copy per account, read
again only when the bank's version counter (bumped by every change) moved: one GET per image otherwise. A reload
reads the bank in chunks and builds the new copy in a thread, then swaps it in, so that neither a large bank's reload
nor its scan holds the ingress event loop (every other request waits on that loop). docs/hash-bank.md has the figures.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.pdq import hamming_distances, pack_hashes
from moderation.items import Item
from policy.decisions import Decision, blocked_by_hash
from store.hash_bank.bank import BankEntry, HashBank, entry_of

# PDQ's usual match threshold (ThreatExchange, HMA): at most this many of 256 bits apart.
MATCH_DISTANCE_BITS = 31


@dataclass(frozen=True)
class HashBankRules:
    match_distance: int = MATCH_DISTANCE_BITS
    # Below this quality a PDQ hash is not trusted (flat or featureless images hash alike): neither banked nor matched.
    min_quality: int = 50
    # Banks of this many accounts are kept in each replica's memory (least recently used ones are dropped).
    cached_accounts: int = 64


@dataclass(frozen=True)
class BankMatch:
    hash: str  # the banked hash that matched
    review_id: int | None  # the rejected item it came from (None: imported)
    distance: int


class PackedBank:
    """A bank as arrays: 32 bytes of hash and 8 of review id per entry (40 MB a million), no Python object each."""

    def __init__(self, entries: list[BankEntry]):
        self.packed = pack_hashes([e.hash for e in entries])
        self.review_ids = np.array([-1 if e.review_id is None else e.review_id for e in entries], dtype=np.int64)

    @classmethod
    def from_stored(cls, raw: dict[str, str]) -> PackedBank:
        """From the bank's hash as stored (PDQ hex -> JSON): a replica's copy, built in a thread."""
        return cls([entry_of(pdq, value) for pdq, value in raw.items()])

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


class BankMatcher:
    """One replica's matching: a packed copy of each recently used account's bank, read again when it changed."""

    def __init__(self, bank: HashBank, rules: HashBankRules | None = None):
        self.bank = bank
        self.rules = rules or HashBankRules()
        self._cache: OrderedDict[str, tuple[str, PackedBank]] = OrderedDict()
        self._reloads: dict[str, asyncio.Task] = {}  # the one reload under way per account

    async def match(self, account: str, pdq: str, mirrored: str | None = None) -> BankMatch | None:
        """The nearest banked hash within the match distance of `pdq` or of `mirrored` (the hash of the image's
        left-right mirror, models/pdq.py), or None. The scan runs in a thread, off the event loop."""
        version = await self.bank.version(account)
        if version is None:
            return None  # never banked anything: the common case costs this one GET
        cached = self._cache.get(account)
        packed = cached[1] if cached is not None and cached[0] == version else await self._reloaded(account)
        self._cache.move_to_end(account)
        while len(self._cache) > self.rules.cached_accounts:
            self._cache.popitem(last=False)
        queries = [query for query in (pdq, mirrored) if query]
        return await asyncio.to_thread(packed.nearest_of, queries, self.rules.match_distance)

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
        version = await self.bank.version(account)
        raw = await self.bank.stored(account)
        packed = await asyncio.to_thread(PackedBank.from_stored, raw)  # JSON and numpy: off the event loop
        self._cache[account] = (version or "0", packed)
        return packed


def bankable_hash(scored: object, bank: BankMatcher | None) -> str | None:
    """The image's PDQ hash when it is good enough to match or to bank, else None (texts have none)."""
    pdq = getattr(scored, "pdq", None)
    if bank is None or pdq is None or pdq.quality < bank.rules.min_quality:
        return None
    return pdq.hash


async def hash_checked(
    bank: BankMatcher | None, account: str, items: Sequence[Item], scored: Sequence[object], decisions: Sequence[Decision]
) -> tuple[list[Decision], list[BankMatch | None]]:
    """Each item's decision (a block where its image matches the account's bank) and its match."""
    checked, matches = [], []
    for item, answer, decision in zip(items, scored, decisions):
        pdq = bankable_hash(answer, bank) if item.kind == "image" else None
        mirrored = getattr(answer.pdq, "mirrored", None) if pdq is not None else None
        match = await bank.match(account, pdq, mirrored) if pdq is not None else None
        checked.append(blocked_by_hash(decision) if match is not None else decision)
        matches.append(match)
    return checked, matches
