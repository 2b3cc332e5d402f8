"""How large one request's message to the text model can grow, so that the transport carrying it can be checked.

Under Ray Serve's throughput mode a call between replicas is one gRPC message, and the receiving replica refuses a
message over its cap (Ray's default: 4 MiB); a refused message would reach the client as a 503 that no retry fixes.
Uploads do not ride these messages (they go by reference through the object store: deployments/handles.py), so the
largest message is a text batch: the pickled texts of one request, each character at most 4 bytes of UTF-8. (A
Perspective comment with its spans is one text and its sentences again: at most twice the plan's characters, far
below a batch's allowance even with an envelope per sentence.)
"""

from __future__ import annotations

from moderation.limits import BATCH_TEXT_LIMITS

UTF8_MAX_BYTES_PER_CHAR = 4
# Everything in the message besides the characters: 100 pickled TextRequests with their categories, and the
# transport's own framing. Measured at 2-10 KB for a full batch (tests/moderation/test_model_messages.py).
ENVELOPE_BYTES = 64 * 1024


def largest_text_message_bytes(text_max_chars: int) -> int:
    """The largest message a request of a plan with `text_max_chars` can send to the text model."""
    return BATCH_TEXT_LIMITS * text_max_chars * UTF8_MAX_BYTES_PER_CHAR + ENVELOPE_BYTES
