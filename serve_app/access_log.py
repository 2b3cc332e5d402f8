"""One metadata-only log line per request: never the key, the image or the text."""

from __future__ import annotations

import json
import logging
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("moderation.access")


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
        request_id = given.decode("latin-1") if given else uuid.uuid4().hex[:16]
        fields: dict = {}
        state = scope.setdefault("state", {})
        state["log_fields"] = fields
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if not given:
                    message.setdefault("headers", []).append((b"x-request-id", request_id.encode()))
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
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
