"""The public FastAPI app (the graph's ingress), built by a plain factory so tests can drive it without Ray.

The admin API is another app (admin/app.py) on a listener of its own: it shares the stores but no port, so it is
never reachable where clients are.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from serve_app import routes_feedback, routes_openai, routes_perspective, routes_public, routes_widget
from serve_app.access_log import AccessLogMiddleware
from serve_app.deadlines import DeadlineMiddleware
from serve_app.docs_page import install_docs
from serve_app.errors import install_error_handlers
from serve_app.schemas import finish_openapi
from serve_app.services import Services
from serve_app.widget_cors import WidgetCorsMiddleware

API_VERSION = "1.0.0"


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    # At shutdown (Serve stops the replica, or uvicorn exits): the work slots of ended requests go back to the store
    # now, not at their lease's end (store/keys/quota.py), so the account's next requests on other replicas are not
    # refused for slots nobody holds.
    await app.state.services.quota.settled()


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Content moderation API",
        version=API_VERSION,
        description="Scores images and text with real models and decides by the caller's profile.",
        docs_url=None,
        redoc_url=None,
        lifespan=_lifespan,
    )
    install_docs(app)  # /docs with Swagger UI's files served here, not from a CDN
    app.state.services = services
    install_error_handlers(app)
    # Inside the access log (added first), so the log sees the 408/429/503 it answers.
    app.add_middleware(DeadlineMiddleware, limits=services.time_limits)
    app.add_middleware(AccessLogMiddleware)
    # Outermost, so that every answer of a widget check, a deadline's or an error's too, gets its CORS headers.
    app.add_middleware(WidgetCorsMiddleware)
    app.include_router(routes_public.router)
    app.include_router(routes_feedback.router)
    app.include_router(routes_openai.router)
    app.include_router(routes_perspective.router)
    app.include_router(routes_widget.router)

    def openapi() -> dict:
        if app.openapi_schema is None:
            finish_openapi(FastAPI.openapi(app))  # generated once, cached in app.openapi_schema
        return app.openapi_schema

    app.openapi = openapi
    return app
