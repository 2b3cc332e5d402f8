"""The access log: one metadata line per request, a request id that is safe to log and echo."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from serve_app.access_log import CLIENT_CLOSED, AccessLogMiddleware

pytestmark = pytest.mark.anyio


def scope(headers: list[tuple[bytes, bytes]] | None = None) -> dict:
    return {"type": "http", "method": "POST", "path": "/v1/moderate-text", "headers": headers or []}


async def run(app, headers=None) -> list[dict]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await AccessLogMiddleware(app)(scope(headers), receive, send)
    return sent


async def answer_204(scope, receive, send):
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def logged(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "moderation.access"]


@pytest.mark.parametrize("bad_id", [b"a\r\nX-Injected: 1", b"x" * 65, b"", b"caf\xc3\xa9"])
async def test_an_unsafe_client_request_id_is_replaced(caplog, bad_id):
    caplog.set_level(logging.INFO, "moderation.access")
    sent = await run(answer_204, [(b"x-request-id", bad_id)])
    (answered,) = [v for k, v in sent[0]["headers"] if k == b"x-request-id"]
    assert answered != bad_id and 1 <= len(answered) <= 64
    assert logged(caplog)[0]["request_id"] == answered.decode()


async def test_a_plain_client_request_id_is_kept_in_the_log(caplog):
    caplog.set_level(logging.INFO, "moderation.access")
    await run(answer_204, [(b"x-request-id", b"req-42.a:b")])
    assert logged(caplog)[0]["request_id"] == "req-42.a:b"


async def test_a_client_that_hangs_up_is_one_log_line_without_a_traceback(caplog):
    caplog.set_level(logging.INFO)

    async def cancelled(scope, receive, send):
        raise asyncio.CancelledError()

    with pytest.raises(asyncio.CancelledError):
        await run(cancelled)
    (entry,) = logged(caplog)
    assert entry["status"] == CLIENT_CLOSED
    assert not [r for r in caplog.records if r.exc_info]
