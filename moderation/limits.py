"""What one request may ask for, checked before any quota unit is taken: the plan's scope, its text limits, the batch
limits and a threshold override. Each rule lives here once; the routes of every API surface call these checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from moderation.errors import InvalidBatch, InvalidText, InvalidThreshold, ScopeNotCovered, TextTooLong
from policy.types import ContentKind, Plan

# A batch (`{"texts": [...]}` on /v1/moderate-text, an array `input` on /v1/moderations): at most this many items,
# each text within the plan's `text_max_chars`, all of them within BATCH_TEXT_LIMITS times that.
MAX_BATCH_ITEMS = 100
BATCH_TEXT_LIMITS = 10
# Perspective's span annotations: at most this many spans per comment (consecutive sentences are grouped when a
# comment has more), so their scoring costs about the comment's own again, and they are charged as one more item.
MAX_SPANS_PER_COMMENT = 100
# Text scoring work of at most this many characters is "short": a text alone joins the TextModel's shared batch
# (@serve.batch) and short work runs on the model's short lane. Longer work (a 20,000-character text is about 250
# windows, seconds of CPU) is a batch of windows already: it goes alone, on the long lane, so it never holds up the
# short texts of other accounts batched or queued behind it.
SHORT_TEXT_WORK_CHARS = 2_000


def is_short_text_work(texts: Sequence[str]) -> bool:
    return sum(len(text) for text in texts) <= SHORT_TEXT_WORK_CHARS


def require_scope(plan: Plan, kind: ContentKind) -> None:
    if not plan.covers(kind):
        raise ScopeNotCovered(f"The plan does not cover {kind} moderation.")


def check_texts(texts: Sequence[str], plan: Plan) -> None:
    """The texts of one request: InvalidBatch for none or too many, TextTooLong for too many characters."""
    if not 1 <= len(texts) <= MAX_BATCH_ITEMS:
        raise InvalidBatch(f"A batch holds from 1 to {MAX_BATCH_ITEMS} items; this one has {len(texts)}.")
    for number, text in enumerate(texts):
        if not text.isascii() and not _encodable(text):
            raise InvalidText(f"{'The text' if len(texts) == 1 else f'Text {number}'} is not valid Unicode "
                              "(it holds a lone surrogate).")
        if len(text) > plan.text_max_chars:
            which = "The text" if len(texts) == 1 else f"Text {number}"
            raise TextTooLong(f"{which} is above the plan's limit of {plan.text_max_chars} characters.")
    if sum(len(text) for text in texts) > BATCH_TEXT_LIMITS * plan.text_max_chars:
        raise TextTooLong(f"The texts are above the plan's limit of {BATCH_TEXT_LIMITS * plan.text_max_chars} "
                          f"characters in all ({BATCH_TEXT_LIMITS} times its limit per text).")  # fmt: skip


def parse_threshold(raw: str | None) -> float | None:
    """The `?threshold=` override: a number in [0, 1], else InvalidThreshold."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidThreshold() from None
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise InvalidThreshold()
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
