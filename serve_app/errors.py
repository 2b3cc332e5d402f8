"""Every error the API answers with, and the one place that turns exceptions into responses.

An error answer is one type, `ApiError`: a status, a stable code (docs/api.md: Errors), a sentence for the client and,
where a retry can succeed, Retry-After. The body is `{"error": {"code": "<code>", "message": "<text>"}}`, except on
the compatible routes, which answer in the envelope their clients parse (`ENVELOPES`: OpenAI's on /v1/moderations,
Google's on the Perspective routes) with the same status and code. The errors only HTTP can see (a bad key, a
malformed body, a deadline) are the `ErrorKind`s below, raised by calling them; the errors of the moderation flow,
the image decoder and the review queue are plain domain exceptions that `DOMAIN_ERRORS` maps to theirs. Anything
unexpected becomes a 500 `internal_error` with no traceback in the body.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from models.image_decoding import DecodeTimeout, ImageTooLarge, InvalidImage
from models.decode_pool import DecodeBusy
from moderation import errors as flow
from policy import widget_verdicts as verdicts
from store.review.queue import (
    QUEUE_FULL_RETRY_AFTER_S,
    InvalidReviewField,
    ReportLimitExceeded,
    ReviewAlreadyDecided,
    ReviewItemNotFound,
    ReviewQueueFull,
)
from webhooks.url_guard import UnsafeWebhookUrl
from store.webhooks.endpoints import TooManyEndpoints
from store.keys.config import UnreadableRecord
from store.widget.tokens import TooManyLiveTokens

log = logging.getLogger("moderation.errors")
T = TypeVar("T")


class ApiError(Exception):
    """`extra`: fields of the native body beside `error` (a 429 `review_queue_full` carries its `result`)."""

    def __init__(
        self, status: int, code: str, message: str, retry_after_s: float | None = None, extra: dict | None = None
    ):
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after_s = status, code, message, retry_after_s
        self.extra = extra or {}

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is None:
            return {}
        # Retry-After is whole seconds; never tell a client to retry at once.
        return {"Retry-After": str(max(1, int(-(-self.retry_after_s // 1))))}


@dataclass(frozen=True)
class ErrorKind:
    """A documented (status, code), the sentence it answers when the raise site gives none, and its Retry-After.

    Calling one gives the ApiError to raise: `raise NotFound(f"No plan named {name!r}.")`.
    """

    status: int
    code: str
    message: str = "The request was refused."
    retry_after_s: float | None = None

    def __call__(
        self, message: str | None = None, *, retry_after_s: float | None = None, extra: dict | None = None
    ) -> ApiError:
        retry_after_s = self.retry_after_s if retry_after_s is None else retry_after_s
        return ApiError(self.status, self.code, message or self.message, retry_after_s, extra)


# The errors only HTTP can see, named as the routes raise them.
InvalidRequest = ErrorKind(400, "invalid_request", "The request is malformed.")
NoImage = ErrorKind(400, "no_image", "The multipart part 'image' (or 'file') is required.")
NoReference = ErrorKind(400, "no_reference", "The form field 'reference' is required.")
ModelNotFound = ErrorKind(400, "model_not_found", "Unknown model.")
CommentEmpty = ErrorKind(400, "comment_empty", "Comment text was empty.")
AttributeNotSupported = ErrorKind(400, "language_not_supported_by_attribute", "The attribute is not supported.")
Unauthorized = ErrorKind(401, "unauthorized", "A valid API key is required: Authorization: Bearer <key>.")
NotFound = ErrorKind(404, "not_found", "Not found.")
NoSuchReviewItem = ErrorKind(404, "not_found", "No such review item.")
MethodNotAllowed = ErrorKind(405, "method_not_allowed", "Method not allowed.")
RequestTimeout = ErrorKind(408, "request_timeout", "The request body did not arrive in time.")
# The account holds its cap of pending review items (store.review.queue.ReviewQueueFull): a report is refused whole;
# a moderation answers its result beside the error, since the content was scored and decided, only not queued.
QueueFull = ErrorKind(
    429, "review_queue_full", "The account's review queue is full; nothing was queued for review.",
    retry_after_s=QUEUE_FULL_RETRY_AFTER_S,
)  # fmt: skip
RateLimited = ErrorKind(429, "rate_limited", "Too many requests; retry after the number of seconds in Retry-After.")
# The browser widget's (serve_app/routes_widget.py, docs/widget.md).
WidgetNotEnabled = ErrorKind(403, "widget_not_enabled", "The key allows no page origin; an operator sets them first.")
OriginNotAllowed = ErrorKind(403, "origin_not_allowed", "The page's origin is not one the key allows for the widget.")
WidgetTokenSpent = ErrorKind(403, "widget_token_spent", "The widget token's checks are used up; mint a new token.")
InternalError = ErrorKind(500, "internal_error", "Internal error.")
Overloaded = ErrorKind(
    503, "overloaded", "The service is at capacity; retry after the seconds in Retry-After.", retry_after_s=1
)
StoreUnavailable = ErrorKind(
    503, "store_unavailable", "The store is temporarily unavailable; nothing was decided.", retry_after_s=5
)

# Domain exception -> the error it answers with; a subclass answers as its base does. The exception's own text is
# the message, except the review queue's, which carry a bare id (their kind's sentence stands in).
_IMAGE_TOO_LARGE = ErrorKind(413, "image_too_large")
DOMAIN_ERRORS: dict[type[Exception], ErrorKind] = {
    flow.InvalidThreshold: ErrorKind(400, "invalid_threshold"),
    flow.InvalidBatch: InvalidRequest,
    flow.InvalidText: InvalidRequest,
    InvalidImage: ErrorKind(400, "invalid_image", "The image could not be decoded or its format is not supported."),
    InvalidReviewField: InvalidRequest,
    flow.QuotaExceeded: ErrorKind(402, "quota_exceeded"),
    flow.ScopeNotCovered: ErrorKind(403, "capability_required"),
    ReviewItemNotFound: NoSuchReviewItem,
    ReviewAlreadyDecided: ErrorKind(409, "already_decided", "The review item has already been decided."),
    flow.UploadTooLarge: _IMAGE_TOO_LARGE,
    ImageTooLarge: _IMAGE_TOO_LARGE,
    flow.TextTooLong: ErrorKind(413, "text_too_long"),
    flow.TooManyInFlight: ErrorKind(429, "too_many_requests_in_flight", retry_after_s=1),
    ReportLimitExceeded: ErrorKind(429, "report_limit_exceeded"),  # Retry-After: the time until the next UTC day
    ReviewQueueFull: QueueFull,
    TooManyLiveTokens: ErrorKind(429, "too_many_widget_tokens"),  # Retry-After: when the key's oldest token expires
    flow.Overloaded: Overloaded,
    flow.ModelUnavailable: ErrorKind(503, "inference_unavailable", retry_after_s=5),
    DecodeBusy: Overloaded,
    DecodeTimeout: Overloaded,
    verdicts.InvalidVerdict: ErrorKind(400, "invalid_verdict"),
    verdicts.VerdictForOtherKey: ErrorKind(403, "verdict_wrong_key"),
    verdicts.VerdictForOtherContent: ErrorKind(409, "verdict_content_mismatch"),
    verdicts.VerdictForOtherKind: ErrorKind(409, "verdict_kind_mismatch"),
    verdicts.VerdictUsed: ErrorKind(409, "verdict_used"),
    verdicts.VerdictExpired: ErrorKind(410, "verdict_expired"),
    UnsafeWebhookUrl: InvalidRequest,  # the admin API's webhook URL rule (SECURITY.md, Outbound requests)
    TooManyEndpoints: InvalidRequest,
    UnreadableRecord: StoreUnavailable,  # a plan or profile stored before non-finite numbers were refused
}


def found(value: T | None, error: ApiError) -> T:
    """`value`, unless there is none: then `error` (the 404 saying what was not found) is raised."""
    if value is None:
        raise error
    return value


def api_error_of(exc: Exception) -> ApiError:
    """The API error a domain exception answers with (500 internal_error for an exception not in the map)."""
    kind = next((DOMAIN_ERRORS[cls] for cls in type(exc).__mro__ if cls in DOMAIN_ERRORS), None)
    if kind is None:
        return InternalError()
    text = str(exc)
    # An exception that knows when a retry can succeed says so itself (the next UTC day, the decode pool's wait).
    return kind(None if text.isdigit() else text, retry_after_s=getattr(exc, "retry_after_s", None))


# OpenAI's error `type` by status; Google's `status` by HTTP status, and Perspective's `errorType` by code.
OPENAI_TYPES = {401: "authentication_error", 402: "insufficient_quota", 403: "permission_error", 429: "rate_limit_error"}
GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 402: "RESOURCE_EXHAUSTED", 403: "PERMISSION_DENIED",
    404: "NOT_FOUND", 405: "UNIMPLEMENTED", 408: "DEADLINE_EXCEEDED", 413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE",
}  # fmt: skip
PERSPECTIVE_ERROR_TYPES = {"text_too_long": "COMMENT_TOO_LONG"}  # else the code in capitals (COMMENT_EMPTY, ...)


def _openai_envelope(error: ApiError) -> dict:
    kind = OPENAI_TYPES.get(error.status, "server_error" if error.status >= 500 else "invalid_request_error")
    return {"error": {"message": error.message, "type": kind, "param": None, "code": error.code}}


def _google_envelope(error: ApiError) -> dict:
    # Perspective's detail says more of some errors beside its type (an attribute's unserved language: which one).
    detail = {"@type": "type.googleapis.com/google.commentanalyzer.v1alpha1.Error",
              "errorType": PERSPECTIVE_ERROR_TYPES.get(error.code, error.code.upper()), **error.extra}  # fmt: skip
    status = GOOGLE_STATUSES.get(error.status, "INTERNAL")
    return {"error": {"code": error.status, "message": error.message, "status": status, "details": [detail]}}


# Path prefix -> the error body its clients parse; every other path answers the native body.
ENVELOPES = {"/v1/moderations": _openai_envelope, "/v1alpha1/": _google_envelope, "/comments:": _google_envelope}


def error_response(error: ApiError, path: str = "") -> JSONResponse:
    envelope = next((make for prefix, make in ENVELOPES.items() if path.startswith(prefix)), None)
    return JSONResponse(
        envelope(error) if envelope else {"error": {"code": error.code, "message": error.message}, **error.extra},
        status_code=error.status,
        headers=error.headers(),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception through `error_response`."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc, request.url.path)

    async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(api_error_of(exc), request.url.path)

    for kind in DOMAIN_ERRORS:
        app.add_exception_handler(kind, _domain_error)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(InvalidRequest(f"{where}: {first.get('msg', 'invalid')}".strip(": ")), request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        path = request.url.path
        if exc.status_code == 405:
            response = error_response(MethodNotAllowed(), path)
            # RFC 9110: a 405 lists the methods the path does support (Starlette puts them in `Allow`).
            if exc.headers and "Allow" in exc.headers:
                response.headers["Allow"] = exc.headers["Allow"]
            return response
        if exc.status_code == 404:
            return error_response(NotFound(), path)
        return error_response(InvalidRequest(str(exc.detail)), path)

    @app.exception_handler(ClientDisconnect)
    async def _client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
        # Nobody reads this answer; one line in the log instead of a traceback.
        log.info("client disconnected during %s %s", request.method, request.url.path)
        return error_response(InvalidRequest("The client disconnected before the body was complete."), request.url.path)

    @app.exception_handler(RedisError)
    async def _store_down(request: Request, exc: RedisError) -> JSONResponse:
        # Fail closed: without the store nothing is authenticated, counted or decided.
        log.warning("store unavailable on %s: %s", request.url.path, exc)
        return error_response(StoreUnavailable(), request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(InternalError(), request.url.path)
