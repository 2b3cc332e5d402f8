"""The FastAPI app, built by a plain factory so tests can drive it without Ray."""

from __future__ import annotations

from fastapi import FastAPI

from serve_app import routes_admin, routes_public
from serve_app.access_log import AccessLogMiddleware
from serve_app.deadlines import DeadlineMiddleware
from serve_app.errors import install_error_handlers
from serve_app.services import Services

API_VERSION = "1.0.0"


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Content moderation API",
        version=API_VERSION,
        description="Scores images and text with real models and decides by the caller's profile.",
    )
    app.state.services = services
    install_error_handlers(app)
    # Inside the access log (added first), so the log sees the 408/429/503 it answers.
    app.add_middleware(DeadlineMiddleware, limits=services.time_limits)
    app.add_middleware(AccessLogMiddleware)
    app.include_router(routes_public.router)
    app.include_router(routes_admin.router)
    return app
