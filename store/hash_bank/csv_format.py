"""A hash bank as CSV, in the format HMA 1.0 reads ThreatExchange PDQ data in: what operators exchange with peers.

One hash a line, no header: `pdq_hex,id,timestamp,tags`, e.g.
`f8f8f0cee0f4a84f06370a22038f63f0b36e2ed596621e1d33e6b39c4e9c9b22,17,2026-11-25T06:00:00+0000,rejected`
(facebook/ThreatExchange, hasher-matcher-actioner's deployed-instance test writes its `pdq.te` file this way). The id
is the rejected review item's (empty for a hash that was imported), the timestamp when the hash was banked, the tags
space-separated (`rejected` or `imported`). Import reads the first column and ignores the rest; a line whose first
column is not 64 hex digits (a header, a note) is skipped and counted.
"""

from __future__ import annotations

from datetime import datetime, timezone

from store.hash_bank.bank import HEX_CHARS, BankEntry

HEX_DIGITS = frozenset("0123456789abcdef")


def to_csv(entries: list[BankEntry]) -> str:
    lines = []
    for entry in entries:
        stamp = datetime.fromtimestamp(entry.added_at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")
        tags = "rejected" if entry.review_id is not None else "imported"
        lines.append(f"{entry.hash},{'' if entry.review_id is None else entry.review_id},{stamp},{tags}\n")
    return "".join(lines)


def hashes_of_csv(text: str) -> tuple[list[str], int]:
    """The distinct valid hashes of an import (lowercased), in order, and how many non-empty lines were skipped."""
    found: dict[str, None] = {}
    skipped = 0
    for line in text.splitlines():
        first = line.split(",", 1)[0].strip().lower()
        if not first:
            continue
        if len(first) == HEX_CHARS and set(first) <= HEX_DIGITS:
            found[first] = None
        else:
            skipped += 1
    return list(found), skipped
