"""Request and response bodies of the public API (README: Endpoints)."""

from __future__ import annotations

from typing import Generic, TypeVar

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policy.types import Action, Mode, ReviewReason, ReviewStatus

MAX_REFERENCE_CHARS = 4096
RawScores = TypeVar("RawScores")
# Review ids come from a Redis counter: up to 18 digits fit an int64; anything else is no item at all.
REVIEW_ID = re.compile(r"[0-9]{1,18}")
# Moderators click image_url in the dashboard: only web links, never javascript:, data: or file:.
WEB_URL = re.compile(r"https?://[^\s]+", re.IGNORECASE)


def review_id_of(raw: str) -> int | None:
    """The id in a review path, or None when it cannot be one (the route answers 404)."""
    return int(raw) if REVIEW_ID.fullmatch(raw) else None


def checked_image_url(value: str | None) -> str | None:
    """`image_url` as given, if it is an http(s) URL of at most 4,096 characters; else ValueError."""
    if value is None or value == "":
        return None
    if len(value) > MAX_REFERENCE_CHARS:
        raise ValueError(f"image_url must be at most {MAX_REFERENCE_CHARS} characters")
    if not WEB_URL.fullmatch(value):
        raise ValueError("image_url must be an http:// or https:// URL")
    return value


class TextModerationRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    text: str
    reference: str | None = Field(default=None, max_length=MAX_REFERENCE_CHARS)
    image_url: str | None = Field(default=None, max_length=MAX_REFERENCE_CHARS)

    @field_validator("text", "reference", "image_url")
    @classmethod
    def _valid_unicode(cls, value: str | None) -> str | None:
        # JSON can carry lone surrogates ("\ud800"), which no encoder, model or store accepts.
        if value is not None:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("must be valid Unicode (no lone surrogates)") from None
        return value

    @field_validator("image_url")
    @classmethod
    def _web_url(cls, value: str | None) -> str | None:
        return checked_image_url(value)


class ImageRawScores(BaseModel):
    nsfw: float
    safe: float


class TextRawScores(BaseModel):
    unsafe: float
    safe: float


class _Result(BaseModel, Generic[RawScores]):
    scores: RawScores
    categories: dict[str, float]
    blocked_by: list[str]
    decision: Action
    recommended_action: Action
    mode: Mode
    threshold: float
    profile: str
    model_version: str
    review_id: int | None = Field(default=None, description="Only when decision is review.")


class ImageResult(_Result[ImageRawScores]):
    """The answer of POST /v1/moderate."""


class TextResult(_Result[TextRawScores]):
    """The answer of POST /v1/moderate-text: the image result's fields, with text scores."""


class ReportResult(BaseModel):
    reference: str
    reports: int
    escalated: bool
    review_id: int | None = Field(default=None, description="The queue item, once escalated.")


class ReviewItemView(BaseModel):
    id: int
    status: ReviewStatus
    reason: ReviewReason
    reference: str | None = None
    image_url: str | None = None
    kind: str | None = None
    created_at: float
    decided_at: float | None = None


class Health(BaseModel):
    status: str
    models: dict[str, str]
