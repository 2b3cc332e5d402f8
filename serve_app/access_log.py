"""One metadata-only log line per request: never the key, the image or the text."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.response_start import NotingSend

log = logging.getLogger("moderation.access")
# A client-chosen id is kept only when it is short and plain: it goes into logs and headers.
RECEIVED_AT = "received_at"  # request.state: when the request reached this app (time.time())
VALID_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
# The status logged for a request whose client went away before the answer (nginx's convention).
CLIENT_CLOSED = 499


class AccessLogMiddleware:
    """Gives each request an id (answered as X-Request-ID) and logs what the handlers noted.

    Behind Ray Serve the proxy has already set `x-request-id` on the request and answers it
    itself; the log then uses the same id, and no second header is added. Handlers add
    metadata to `request.state.log_fields` (sizes, format, scores, decision).
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"x-request-id")
        if given is not None and not VALID_REQUEST_ID.fullmatch(given):
            given = None  # replaced, never echoed: it could carry newlines or megabytes
        request_id = given.decode("ascii") if given else uuid.uuid4().hex[:16]
        fields: dict = {}
        state = scope.setdefault("state", {})
        state["log_fields"] = fields
        state[RECEIVED_AT] = time.time()  # wall clock: what a model replica reads a caller's deadline on
        started = time.perf_counter()
        cancelled = False

        async def add_request_id(message: Message) -> None:
            if not given:
                message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))

        send_with_id = NotingSend(send, add_request_id)
        try:
            await self.app(scope, receive, send_with_id)
        except asyncio.CancelledError:
            cancelled = True  # one log line below, no traceback: the client hung up
            raise
        finally:
            status = CLIENT_CLOSED if cancelled else (send_with_id.status or 500)
            entry = {
                "request_id": request_id,
                "account": state.get("account"),
                "method": scope["method"],
                "endpoint": scope["path"],
                "status": status,
                "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                **fields,
            }
            log.info(json.dumps(entry, default=str))
