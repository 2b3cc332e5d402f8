"""Every error the API answers with, and the one place that turns exceptions into responses.

The body is `{"error": {"code": "<code>", "message": "<text>"}}`, except on the compatible routes, which
answer in the envelope their clients parse (`ENVELOPES`: OpenAI's on /v1/moderations, Google's on the
Perspective routes) with the same status and code. Errors only HTTP
can see (a bad key, a malformed body) are `ApiError` classes here; the errors of the
moderation flow, the image decoder and the review queue are plain domain exceptions that
`DOMAIN_ERRORS` maps to a status and code. Anything unexpected becomes a 500
`internal_error` with no traceback in the body.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from models.image_decoding import DecodeTimeout, ImageTooLarge, InvalidImage
from models.decode_pool import DecodeBusy
from moderation import errors as flow
from policy.review_queue import (
    InvalidReviewField,
    ReportLimitExceeded,
    ReviewAlreadyDecided,
    ReviewItemNotFound,
)

log = logging.getLogger("moderation.errors")


class ApiError(Exception):
    status: int = 500
    code: str = "internal_error"
    message: str = "Internal error."

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = None):
        super().__init__(message or self.message)
        self.message = message or self.message
        self.retry_after_s = retry_after_s

    @classmethod
    def with_code(cls, status: int, code: str, message: str, retry_after_s: float | None = None) -> ApiError:
        error = cls(message, retry_after_s=retry_after_s)
        error.status, error.code = status, code
        return error

    def headers(self) -> dict[str, str]:
        if self.retry_after_s is None:
            return {}
        # Retry-After is whole seconds; never tell a client to retry at once.
        return {"Retry-After": str(max(1, int(-(-self.retry_after_s // 1))))}


class InvalidRequest(ApiError):
    status, code, message = 400, "invalid_request", "The request is malformed."


class NoImage(ApiError):
    status, code, message = 400, "no_image", "The multipart part 'image' (or 'file') is required."


class NoReference(ApiError):
    status, code, message = 400, "no_reference", "The form field 'reference' is required."


class Unauthorized(ApiError):
    status, code, message = 401, "unauthorized", "A valid API key is required: Authorization: Bearer <key>."


class ModelNotFound(ApiError):
    status, code, message = 400, "model_not_found", "Unknown model."


class CommentEmpty(ApiError):
    status, code, message = 400, "comment_empty", "Comment text was empty."


class AttributeNotSupported(ApiError):
    status, code, message = 400, "language_not_supported_by_attribute", "The attribute is not supported."


class NotFound(ApiError):
    status, code, message = 404, "not_found", "Not found."


class MethodNotAllowed(ApiError):
    status, code, message = 405, "method_not_allowed", "Method not allowed."


class RateLimited(ApiError):
    status, code, message = 429, "rate_limited", "Too many requests; retry after the number of seconds in Retry-After."


class StoreUnavailable(ApiError):
    status, code, message = 503, "store_unavailable", "The store is temporarily unavailable; nothing was decided."

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = 5):
        super().__init__(message, retry_after_s=retry_after_s)


class RequestTimeout(ApiError):
    status, code, message = 408, "request_timeout", "The request body did not arrive in time."


class TooManyInFlight(ApiError):
    status, code = 429, "too_many_requests_in_flight"
    message = "Too many requests of this account are in progress; retry after the seconds in Retry-After."


class Overloaded(ApiError):
    status, code, message = 503, "overloaded", "The service is at capacity; retry after the seconds in Retry-After."


# Domain exception -> (status, code, Retry-After seconds). A subclass maps as its base does.
DOMAIN_ERRORS: dict[type[Exception], tuple[int, str, float | None]] = {
    flow.InvalidThreshold: (400, "invalid_threshold", None),
    flow.InvalidBatch: (400, "invalid_request", None),
    InvalidImage: (400, "invalid_image", None),
    InvalidReviewField: (400, "invalid_request", None),
    flow.QuotaExceeded: (402, "quota_exceeded", None),
    flow.ScopeNotCovered: (403, "capability_required", None),
    ReviewItemNotFound: (404, "not_found", None),
    ReviewAlreadyDecided: (409, "already_decided", None),
    flow.UploadTooLarge: (413, "image_too_large", None),
    ImageTooLarge: (413, "image_too_large", None),
    flow.TextTooLong: (413, "text_too_long", None),
    # Retry-After: the exception's own `retry_after_s` (the time until the next UTC day).
    ReportLimitExceeded: (429, "report_limit_exceeded", 3600),
    flow.Overloaded: (503, "overloaded", 1),
    flow.ModelUnavailable: (503, "inference_unavailable", 5),
    DecodeBusy: (503, "overloaded", 1),
    DecodeTimeout: (503, "overloaded", 1),
}
# The review queue's exceptions carry a bare id, not a sentence for the client.
CLIENT_MESSAGES = {
    ReviewItemNotFound: "No such review item.",
    ReviewAlreadyDecided: "The review item has already been decided.",
}
FALLBACK_MESSAGES = {InvalidImage: "The image could not be decoded or its format is not supported."}


def api_error_of(exc: Exception) -> ApiError:
    """The API error a domain exception answers with (500 for an exception not in the table)."""
    for kind in type(exc).__mro__:
        if kind in DOMAIN_ERRORS:
            status, code, retry_after_s = DOMAIN_ERRORS[kind]
            # An exception that knows when a retry can succeed says so itself.
            retry_after_s = getattr(exc, "retry_after_s", None) or retry_after_s
            message = CLIENT_MESSAGES.get(kind) or str(exc) or FALLBACK_MESSAGES.get(kind, "The request was refused.")
            return ApiError.with_code(status, code, message, retry_after_s)
    return ApiError()


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
    detail = {"@type": "type.googleapis.com/google.commentanalyzer.v1alpha1.Error",
              "errorType": PERSPECTIVE_ERROR_TYPES.get(error.code, error.code.upper())}  # fmt: skip
    status = GOOGLE_STATUSES.get(error.status, "INTERNAL")
    return {"error": {"code": error.status, "message": error.message, "status": status, "details": [detail]}}


# Path prefix -> the error body its clients parse; every other path answers the native body.
ENVELOPES = {"/v1/moderations": _openai_envelope, "/v1alpha1/": _google_envelope}


def error_response(error: ApiError, path: str = "") -> JSONResponse:
    envelope = next((make for prefix, make in ENVELOPES.items() if path.startswith(prefix)), None)
    return JSONResponse(
        envelope(error) if envelope else {"error": {"code": error.code, "message": error.message}},
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
        return error_response(ApiError(), request.url.path)
