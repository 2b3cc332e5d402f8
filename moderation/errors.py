"""Why the moderation flow refuses or fails a request: plain exceptions, no HTTP here.

Each carries a message for the client; `serve_app.errors` alone decides the status and
error code each one answers with.
"""

from __future__ import annotations


class ModerationError(Exception):
    default_message = "The request could not be moderated."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message


class InvalidThreshold(ModerationError):
    default_message = "threshold must be a number between 0 and 1."


class ScopeNotCovered(ModerationError):
    default_message = "The plan does not cover this content type."


class UploadTooLarge(ModerationError):
    default_message = "The image is above the plan's size limit."


class TextTooLong(ModerationError):
    default_message = "The text is above the plan's length limit."


class InvalidBatch(ModerationError):
    default_message = "A batch holds from 1 to 100 items."


class QuotaExceeded(ModerationError):
    default_message = "The plan's monthly quota is exhausted; it resets on the 1st (UTC)."


class ModelUnavailable(ModerationError):
    """A model or the policy failed or timed out: nothing was decided, the client may retry."""

    default_message = "The model is temporarily unavailable; retry later."


class Overloaded(ModelUnavailable):
    """A model deployment's queue is full (Serve's back-pressure): nothing was decided, retry shortly."""

    default_message = "The service is at capacity; retry after the seconds in Retry-After."
