"""Why the moderation flow refuses or fails a request: plain exceptions, no HTTP here.

Each carries a message for the client (those raised with no message of their own say their
`default_message`); `serve_app.errors` alone decides the status and error code each one answers with.
"""

from __future__ import annotations


class ModerationError(Exception):
    default_message = "The request could not be moderated."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message


class InvalidThreshold(ModerationError):
    """`?threshold=` is not a number from 0 to 1."""

    default_message = "threshold must be a number between 0 and 1."


class ScopeNotCovered(ModerationError):
    """The key's plan does not cover the content's kind (its scope: images, text or both)."""


class UploadTooLarge(ModerationError):
    """An upload over the plan's `image_max_bytes`, found before its bytes are all read."""


class TextTooLong(ModerationError):
    """A text, the texts of one request, or the JSON body carrying them, over the plan's characters."""


class InvalidText(ModerationError):
    """A text that is not valid Unicode (a lone surrogate such as "\\ud800", which JSON can carry): no model,
    encoder or store takes it, and inside a model's batch it would fail the other requests' texts too."""


class InvalidBatch(ModerationError):
    """A batch with no item or more than `moderation.limits.MAX_BATCH_ITEMS`."""


class QuotaExceeded(ModerationError):
    """The account's units of this month do not cover the request's items; none was taken."""

    default_message = "The plan's monthly quota is exhausted; it resets on the 1st (UTC)."


class TooManyInFlight(ModerationError):
    """The account already has its plan's `max_in_flight` requests in progress (or bodies being received): nothing
    was taken; a retry once some finish succeeds."""

    default_message = "Too many requests of this account are in progress; retry after the seconds in Retry-After."
    retry_after_s = 1


class ModelUnavailable(ModerationError):
    """A model or the policy failed or timed out: nothing was decided, the client may retry."""

    default_message = "The model is temporarily unavailable; retry later."


class Overloaded(ModelUnavailable):
    """A model deployment's queue is full (Serve's back-pressure): nothing was decided, retry shortly."""

    default_message = "The service is at capacity; retry after the seconds in Retry-After."
