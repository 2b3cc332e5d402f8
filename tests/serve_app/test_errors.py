"""The one place exceptions become responses: domain errors map to their status and code."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi import FastAPI, Request
from redis.exceptions import ConnectionError as RedisConnectionError

from models.image_decoding import DecodeTimeout, ImageTooLarge, InvalidImage
from models.decode_pool import DecodeBusy
from moderation import errors as flow
from policy import widget_verdicts as verdicts
from store.review.queue import (
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
from serve_app import errors
from support.error_kinds import every_error_kind
from serve_app.errors import DOMAIN_ERRORS, ApiError, ErrorKind, api_error_of, error_response, install_error_handlers


CASES = [
    (flow.InvalidThreshold(), 400, "invalid_threshold"),
    (flow.InvalidBatch(), 400, "invalid_request"),
    (flow.InvalidText(), 400, "invalid_request"),
    (InvalidImage("not an image"), 400, "invalid_image"),
    (InvalidReviewField("'reference' is longer than 4096 characters."), 400, "invalid_request"),
    (flow.QuotaExceeded(), 402, "quota_exceeded"),
    (flow.ScopeNotCovered(), 403, "capability_required"),
    (ReviewItemNotFound(7), 404, "not_found"),
    (ReviewAlreadyDecided(7), 409, "already_decided"),
    (flow.UploadTooLarge(), 413, "image_too_large"),
    (ImageTooLarge(50_000_000, 40_000_000), 413, "image_too_large"),
    (flow.TextTooLong(), 413, "text_too_long"),
    (ReportLimitExceeded("reports", 10_000, 3600), 429, "report_limit_exceeded"),
    (flow.TooManyInFlight(), 429, "too_many_requests_in_flight"),
    (ReviewQueueFull(10_000), 429, "review_queue_full"),
    (flow.ModelUnavailable(), 503, "inference_unavailable"),
    (flow.Overloaded(), 503, "overloaded"),
    (DecodeBusy("all decode workers busy"), 503, "overloaded"),
    (DecodeTimeout("decoding took too long"), 503, "overloaded"),
    (UnsafeWebhookUrl("A webhook URL must start with http:// or https://."), 400, "invalid_request"),
    (TooManyEndpoints(10), 400, "invalid_request"),
    (UnreadableRecord("plan", "gold"), 503, "store_unavailable"),
    (verdicts.InvalidVerdict("changed"), 400, "invalid_verdict"),
    (verdicts.VerdictForOtherKey("another key's"), 403, "verdict_wrong_key"),
    (verdicts.VerdictForOtherContent("other content"), 409, "verdict_content_mismatch"),
    (verdicts.VerdictForOtherKind("a text's verdict for a photo"), 409, "verdict_kind_mismatch"),
    (verdicts.VerdictUsed("redeemed before"), 409, "verdict_used"),
    (verdicts.VerdictExpired("too old"), 410, "verdict_expired"),
    (TooManyLiveTokens(5_000, 90), 429, "too_many_widget_tokens"),
]


@pytest.mark.parametrize(("exc", "status", "code"), CASES)
def test_each_domain_error_answers_its_status_and_code(exc, status, code):
    error = api_error_of(exc)
    assert (error.status, error.code) == (status, code)


def test_too_many_in_flight_says_when_to_retry():
    assert api_error_of(flow.TooManyInFlight()).headers() == {"Retry-After": "1"}


def test_every_mapped_domain_error_is_covered_above():
    assert {type(exc) for exc, _, _ in CASES} == set(DOMAIN_ERRORS)


def test_the_body_is_the_documented_error_shape():
    response = error_response(api_error_of(flow.TextTooLong("The text is above 10 characters.")))
    assert json.loads(response.body) == {
        "error": {"code": "text_too_long", "message": "The text is above 10 characters."}
    }


def test_review_errors_never_show_their_bare_id_as_the_message():
    assert api_error_of(ReviewItemNotFound(7)).message == "No such review item."


def test_a_retryable_error_carries_retry_after_in_whole_seconds():
    assert error_response(api_error_of(flow.ModelUnavailable())).headers["retry-after"] == "5"
    assert ApiError(429, "rate_limited", "x", retry_after_s=0.2).headers() == {"Retry-After": "1"}
    assert errors.Overloaded().headers() == {"Retry-After": "1"} and errors.NotFound().headers() == {}


def test_an_error_kind_answers_its_own_sentence_unless_the_raise_site_gives_one():
    assert (errors.NoImage().status, errors.NoImage().code) == (400, "no_image")
    assert errors.NoImage().message == "The multipart part 'image' (or 'file') is required."
    assert errors.NotFound("No plan named 'x'.").message == "No plan named 'x'."
    assert errors.RateLimited(retry_after_s=3).retry_after_s == 3


def test_every_error_kind_raised_by_name_is_defined_once_per_code():
    named = [value for value in vars(errors).values() if isinstance(value, ErrorKind)]
    codes = [kind.code for kind in named if kind is not errors.NoSuchReviewItem]  # not_found with its own sentence
    assert len(codes) == len(set(codes))
    assert {kind for kind in DOMAIN_ERRORS.values()} <= every_error_kind()


def test_an_unmapped_exception_is_a_plain_500():
    error = api_error_of(RedisConnectionError("down"))
    assert (error.status, error.code, error.message) == (500, "internal_error", "Internal error.")


@pytest.mark.anyio
async def test_a_client_disconnect_is_one_log_line_not_a_traceback(caplog):
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/read")
    async def read(request: Request) -> dict:
        return {"size": len(await request.body())}

    async def receive():
        return {"type": "http.disconnect"}

    sent = []

    async def send(message):
        sent.append(message)

    caplog.set_level(logging.INFO, logger="moderation.errors")
    scope = {"type": "http", "method": "POST", "path": "/read", "headers": [], "query_string": b"",
             "http_version": "1.1", "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    await app(scope, receive, send)
    assert sent[0]["status"] == 400
    assert [r for r in caplog.records if "disconnected" in r.getMessage()]
    assert not [r for r in caplog.records if r.exc_info]


def test_a_refused_report_says_when_the_next_utc_day_starts():
    error = api_error_of(ReportLimitExceeded("escalations", 1000, retry_after_s=7200.4))
    assert (error.status, error.code) == (429, "report_limit_exceeded")
    assert "1000" in error.message
    assert error_response(error).headers["retry-after"] == "7201"
