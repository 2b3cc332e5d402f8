"""The largest message a request sends to the text model, as the start-up check counts it, is never an undercount."""

from __future__ import annotations

from ray import cloudpickle  # what Serve pickles a call's arguments with

from models.text_scoring import TextRequest
from moderation.compat_mapping import sentence_spans
from moderation.limits import BATCH_TEXT_LIMITS, MAX_BATCH_ITEMS, MAX_SPANS_PER_COMMENT
from moderation.model_messages import largest_text_message_bytes
from policy.types import MAX_TEXT_CHARS, TEXT_CATEGORIES

RAY_DEFAULT_REPLICA_MESSAGE_CAP = 4 * 1024 * 1024


def test_a_full_batch_of_four_byte_characters_pickles_within_the_count():
    text_max_chars = 2_000
    per_text = BATCH_TEXT_LIMITS * text_max_chars // MAX_BATCH_ITEMS  # the batch's whole allowance, spread out
    # 4 bytes each in UTF-8, the most a character takes; all different (pickle stores a repeated object once)
    texts = [chr(0x1F600 + i) * per_text for i in range(MAX_BATCH_ITEMS)]
    requests = [TextRequest(text=text, categories=TEXT_CATEGORIES) for text in texts]
    pickled = len(cloudpickle.dumps(requests))
    assert pickled <= largest_text_message_bytes(text_max_chars)
    # ... and the count is not padded beyond use: the envelope is the gap, and it is far from the characters.
    assert largest_text_message_bytes(text_max_chars) - pickled < 64 * 1024


def test_the_largest_plan_a_default_install_admits_fits_rays_default_cap():
    assert largest_text_message_bytes(MAX_TEXT_CHARS) <= RAY_DEFAULT_REPLICA_MESSAGE_CAP


def test_a_comment_with_a_span_per_sentence_pickles_within_the_count():
    # The shortest sentences make the most spans, all in the comment's one call to the text model.
    text_max_chars = 2_000
    for sentence in ("a.", chr(0x1F600) + "."):
        text = (sentence * text_max_chars)[:text_max_chars]
        parts = [(0, len(text)), *sentence_spans(text, 160, MAX_SPANS_PER_COMMENT)]  # the comment, then its sentences
        requests = [TextRequest(text=text[begin:end], categories=TEXT_CATEGORIES) for begin, end in parts]
        assert len(cloudpickle.dumps(requests)) <= largest_text_message_bytes(text_max_chars)


def test_a_comment_split_into_the_most_spans_still_fits_the_count():
    # Perspective's spanAnnotations send the comment and its spans in the same call; one-character sentences at the
    # largest plan limit are grouped into MAX_SPANS_PER_COMMENT spans.
    import yaml

    from moderation.compat_mapping import sentence_spans
    from moderation.items import text_item
    from policy.types import Profile
    from runtime.settings import PROJECT_ROOT

    profile = Profile(name="default", **yaml.safe_load((PROJECT_ROOT / "config" / "profiles.yaml").read_text())["default"])
    text = "\U0001F600." * (MAX_TEXT_CHARS // 2)
    item = text_item(profile, text, spans=sentence_spans(text, 160, MAX_SPANS_PER_COMMENT))
    requests = [item.content, *item.span_requests()]
    assert len(requests) == MAX_SPANS_PER_COMMENT + 1
    assert len(cloudpickle.dumps(requests)) <= largest_text_message_bytes(MAX_TEXT_CHARS)
