"""Every error the API answers with: one exception class per code, one renderer.

The body is always `{"error": {"code": "<code>", "message": "<text>"}}`. Anything
unexpected becomes a 500 `internal_error` with no traceback in the body.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("moderation.errors")


class ApiError(Exception):
    status: int = 500
    code: str = "internal_error"
    message: str = "Internal error."

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = None):
        super().__init__(message or self.message)
        self.message = message or self.message
        self.retry_after_s = retry_after_s

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


class InvalidImage(ApiError):
    status, code, message = 400, "invalid_image", "The image could not be decoded or its format is not supported."


class InvalidThreshold(ApiError):
    status, code, message = 400, "invalid_threshold", "threshold must be a number between 0 and 1."


class Unauthorized(ApiError):
    status, code, message = 401, "unauthorized", "A valid API key is required: Authorization: Bearer <key>."


class QuotaExceeded(ApiError):
    status, code, message = 402, "quota_exceeded", "The plan's monthly quota is exhausted; it resets on the 1st (UTC)."


class CapabilityRequired(ApiError):
    status, code, message = 403, "capability_required", "The plan does not cover this content type."


class NotFound(ApiError):
    status, code, message = 404, "not_found", "Not found."


class MethodNotAllowed(ApiError):
    status, code, message = 405, "method_not_allowed", "Method not allowed."


class AlreadyDecided(ApiError):
    status, code, message = 409, "already_decided", "The review item has already been decided."


class ImageTooLarge(ApiError):
    status, code, message = 413, "image_too_large", "The image is above the plan's size limit."


class TextTooLong(ApiError):
    status, code, message = 413, "text_too_long", "The text is above the plan's length limit."


class RateLimited(ApiError):
    status, code, message = 429, "rate_limited", "Too many requests; retry after the number of seconds in Retry-After."


class InferenceUnavailable(ApiError):
    status, code, message = 503, "inference_unavailable", "The model is temporarily unavailable; retry later."

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = 5):
        super().__init__(message, retry_after_s=retry_after_s)


class StoreUnavailable(ApiError):
    status, code, message = 503, "store_unavailable", "The store is temporarily unavailable; nothing was decided."

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = 5):
        super().__init__(message, retry_after_s=retry_after_s)


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": error.code, "message": error.message}},
        status_code=error.status,
        headers=error.headers(),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception through `error_response`."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(InvalidRequest(f"{where}: {first.get('msg', 'invalid')}".strip(": ")))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 405:
            return error_response(MethodNotAllowed())
        if exc.status_code == 404:
            return error_response(NotFound())
        return error_response(InvalidRequest(str(exc.detail)))

    @app.exception_handler(RedisError)
    async def _store_down(request: Request, exc: RedisError) -> JSONResponse:
        # Fail closed: without the store nothing is authenticated, counted or decided.
        log.warning("store unavailable on %s: %s", request.url.path, exc)
        return error_response(StoreUnavailable())

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(ApiError())
