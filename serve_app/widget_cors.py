"""CORS for the widget's checks, and for Perspective's browser clients: a page may read an answer only when its
origin is one the key allows (the operator's list per key, `PUT /admin/v1/keys/{id}/widget`).

The route decides (it learns the key from the widget token, or the Perspective key) and leaves the origin in the
request's state; this
middleware then adds `Access-Control-Allow-Origin` to whatever the answer is, errors included, so the widget can tell
a refusal from an unreachable service. Every other answer carries no CORS header, so a page of another origin reads
nothing. Credentials are never allowed: the widget sends no cookie, and the token travels in `Authorization`.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOWED_ORIGIN_STATE = "widget_allowed_origin"
# The routes a browser page may call: the widget's checks, and Perspective's for browser clients of it (with the
# same per-key list of origins, serve_app/routes_perspective.py).
CORS_PATHS = ("/v1/widget/check-", "/v1alpha1/comments:", "/comments:")
# How long a browser may reuse a preflight's answer, in seconds (browsers cap it: Chromium at 2 hours).
PREFLIGHT_MAX_AGE_S = 600


def preflight_headers(origin: str) -> dict[str, str]:
    """A preflight carries no token, so it is answered for any origin that some key allows; the check itself then
    holds the page to the origins of its token's key."""
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": "POST",
        "Access-Control-Allow-Headers": "authorization, content-type",
        "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_S),
        "Vary": "Origin",
    }


class WidgetCorsMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(CORS_PATHS):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.add_vary_header("Origin")
                origin = state.get(ALLOWED_ORIGIN_STATE)
                if origin is not None:
                    headers["Access-Control-Allow-Origin"] = origin
                    headers["Access-Control-Expose-Headers"] = "Retry-After"
            await send(message)

        await self.app(scope, receive, send_with_cors)
