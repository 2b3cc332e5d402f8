"""Disguised words made plain again: leetspeak ("h4te", "p@rasites", "Mu$lims") and words spelt out letter by letter
("K i l l every ..."), the two spellings users type to slip past a filter that the models read worst.

`undisguised(text)` is the text with both undone; it is the text itself when nothing in it looks disguised. The
models do not read it *instead* of the text: a window that changes is scored beside the window as written, and the
worst window counts, as for every window (models/text_toxicity.py). So a rule that fires on a word no one
disguised (a product name with a digit in it, Arabic written in Latin letters with digits for its sounds) adds one
window of garbled text, which scores what garbled text scores, and never takes away the score of what was written.

Pure string rules; what each one leaves alone is in its comment.
"""

from __future__ import annotations

import re

# The characters typed for a letter. 1 is "i" rather than "l": "k1ll", "1d1ot", "b1tch", "musl1m" read either way,
# and "i" is the far more common reading in the leet spellings of slurs. 2, 6, 8 and 9 are left alone: Arabic
# written in Latin letters uses them for sounds, and leet rarely uses them.
LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i",
                      "€": "e"})
_LATIN = "A-Za-zÀ-ÖØ-öø-ɏ"
# A word with a run of at most two leet characters between Latin letters ("W0m3n", "fr34ks", "b!tch"). A leading or
# trailing one alone ("5km", "@user", "idiot!", "$100", "mp3") is no sign of a disguise, except a dollar after three
# letters ("animal$"); a word that has an inner one has its outer ones read too ("1mm1grants", "Mu$lim$"). "@" and
# "!" count only before a small letter: "ho@RealWizKhalifa" is a handle and "Witz!Grundlose" a missing space.
_WORD = re.compile(rf"[{_LATIN}0-9@$!€]+")
_INNER_LEET = re.compile(rf"(?<=[{_LATIN}])(?:[013457$€]{{1,2}}(?=[{_LATIN}])|[@!](?=[a-zà-öø-ÿ]))"
                         rf"|(?<=[{_LATIN}]{{3}})\$(?![{_LATIN}0-9@$!€])")  # looks back only from a sign: fast
# Addresses, handles and hashtags are written that way on purpose: "jo@example.com", "https://x.io/p4ge", "@m4rk",
# "#march4marriage".
_LEFT_AS_WRITTEN = re.compile(r"\S*(?:://|www\.)\S*|\S+@\S+\.\S+|(?<!\S)[@#]\S+")
# Three or more single Latin letters, each followed by one space ("K i l l", "d i s g u s t i n g"). Two are left
# alone: "y a", "a w", "i z" are words of their own in French and Polish.
_SPELT_OUT = re.compile(rf"(?<![^\s\"'(])(?:[{_LATIN}] ){{2,}}[{_LATIN}](?![{_LATIN}0-9])")


def undisguised(text: str) -> str:
    """`text` with leet words read as letters and letter-by-letter words joined; `text` itself when neither occurs."""
    if not (_INNER_LEET.search(text) or _SPELT_OUT.search(text)):
        return text  # nearly every text: two scans, no copy
    joined = _SPELT_OUT.sub(lambda match: match.group(0).replace(" ", ""), text)
    pieces, last = [], 0
    for kept in _LEFT_AS_WRITTEN.finditer(joined):
        pieces.append(_plain_words(joined[last:kept.start()]))
        pieces.append(kept.group(0))
        last = kept.end()
    pieces.append(_plain_words(joined[last:]))
    return "".join(pieces)


def _plain_words(stretch: str) -> str:
    return _WORD.sub(lambda word: _read_as_letters(word.group(0)) if _INNER_LEET.search(word.group(0))
                     else word.group(0), stretch)


def _read_as_letters(word: str) -> str:
    plain = word.translate(LEET)
    return plain.upper() if word.isupper() else plain  # "BL4CK" reads "BLACK", not "BLaCK"


def with_undisguised(windows: list[str]) -> list[str]:
    """`windows`, then the undisguised form of each one that has a disguise (in the same order)."""
    return windows + [plain for window in windows if (plain := undisguised(window)) != window]
