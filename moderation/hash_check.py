"""The hash bank's step of the moderation flow: an image a moderator already rejected is blocked again.

Beside the models, after them: the PDQ hash comes with the ImageModel's answer (models/image_upload.py), so the
bank is checked once the image is scored, and a match overrides the profile's decision (moderation/hash_matching.py,
policy/decisions.py `blocked_by_hash`). Only a hash of quality `min_quality` or more is matched or kept with a review item.
"""

from __future__ import annotations

from collections.abc import Sequence

from moderation.items import Item
from policy.decisions import Decision, blocked_by_hash
from moderation.hash_matching import BankMatch, BankMatcher


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
