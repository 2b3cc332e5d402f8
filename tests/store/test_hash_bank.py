"""The hash bank's matching: packed uint64 words, popcount distances, the 31-bit threshold, per-account caching."""

from __future__ import annotations

import random

import pytest

from store.hash_bank import BankEntry, HashBank, PackedBank
from policy.decisions import Decision, blocked_by_hash

pytestmark = pytest.mark.anyio


def _flipped(pdq: str, bits: int, rng: random.Random) -> str:
    number = int(pdq, 16)
    for position in rng.sample(range(256), bits):
        number ^= 1 << position
    return f"{number:064x}"


def test_the_nearest_hash_within_31_bits_matches_and_32_bits_does_not():
    rng = random.Random(3)
    banked = [f"{rng.getrandbits(256):064x}" for _ in range(1000)]
    bank = PackedBank([BankEntry(h, i, 0.0) for i, h in enumerate(banked)])
    match = bank.nearest(_flipped(banked[417], 31, rng), 31)
    assert (match.hash, match.review_id, match.distance) == (banked[417], 417, 31)
    assert bank.nearest(_flipped(banked[417], 32, rng), 31) is None
    assert bank.nearest(banked[5], 31).distance == 0
    assert PackedBank([]).nearest(banked[0], 31) is None
    assert bank.nbytes == 1000 * 40


def test_an_imported_entry_matches_without_a_review_id():
    pdq = "ab" * 32
    assert PackedBank([BankEntry(pdq, None, 0.0)]).nearest(pdq, 31).review_id is None


def test_a_hash_match_blocks_in_enforce_and_review_modes_and_only_recommends_in_monitor():
    for mode, expected in (("enforce", "block"), ("review", "block"), ("monitor", "allow")):
        decided = blocked_by_hash(Decision("allow", "allow", 0.8, [], mode, "p"))
        assert (decided.decision, decided.recommended_action, decided.blocked_by) == (expected, "block", ["hash_match"])


async def test_a_replicas_copy_is_read_again_only_when_the_bank_changed(redis_client):
    bank, pdq = HashBank(redis_client), "cd" * 32
    assert await bank.match("acme", pdq) is None  # no bank at all: one GET
    await bank.add_many("acme", [(pdq, 9)])
    assert (await bank.match("acme", pdq)).review_id == 9
    other = HashBank(redis_client)
    await other.remove("acme", pdq)
    assert await bank.match("acme", pdq) is None  # the version moved: read again
    assert await bank.add_many("acme", [(pdq, 1), (pdq, 2)], keep_existing=True) == 1
    assert (await bank.match("acme", pdq)).review_id == 1
