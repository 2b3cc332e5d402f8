"""A plan's largest text for the end-to-end tests: benign prose of the default plan's 20,000 characters."""

from __future__ import annotations

from bench.inputs import TEXTS

LONG_TEXT_CHARS = 20_000


def long_text() -> str:
    """About LONG_TEXT_CHARS of benign prose made of the bench's longer texts."""
    text, parts = "", list(TEXTS[3:])
    while len(text) < LONG_TEXT_CHARS:
        text += " " + parts[len(text) % len(parts)]
    return text[:LONG_TEXT_CHARS].strip()
