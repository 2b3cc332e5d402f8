"""The FastAPI apps, built by plain factories so tests can drive them without Ray.

The public app (the graph's ingress) and the admin app (its own listener, started by the
runner) share the stores but no port: the admin API is never reachable where clients are.
"""

from __future__ import annotations

from fastapi import FastAPI

from serve_app import (
    routes_admin,
    routes_admin_users,
    routes_hash_bank,
    routes_openai,
    routes_perspective,
    routes_public,
    routes_webhooks,
)
from serve_app.access_log import AccessLogMiddleware
from serve_app.admin_audit import AdminAuditMiddleware
from serve_app.admin_guard import AdminGuard
from serve_app.deadlines import DeadlineMiddleware
from serve_app.docs_page import install_docs
from serve_app.errors import install_error_handlers
from serve_app.schemas import finish_openapi
from serve_app.services import Services

API_VERSION = "1.0.0"


def create_app(services: Services) -> FastAPI:
    app = FastAPI(
        title="Content moderation API",
        version=API_VERSION,
        description="Scores images and text with real models and decides by the caller's profile.",
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)  # /docs with Swagger UI's files served here, not from a CDN
    app.state.services = services
    install_error_handlers(app)
    # Inside the access log (added first), so the log sees the 408/429/503 it answers.
    app.add_middleware(DeadlineMiddleware, limits=services.time_limits)
    app.add_middleware(AccessLogMiddleware)
    app.include_router(routes_public.router)
    app.include_router(routes_openai.router)
    app.include_router(routes_perspective.router)

    def openapi() -> dict:
        if app.openapi_schema is None:
            finish_openapi(FastAPI.openapi(app))  # generated once, cached in app.openapi_schema
        return app.openapi_schema

    app.openapi = openapi
    return app


def create_admin_app(services: Services, admin_token: str) -> FastAPI:
    """The admin API alone, for its own listener (loopback by default): never on the public port. The listener
    serves the dashboard beside it (dashboard.app)."""
    app = FastAPI(title="Content moderation admin API", version=API_VERSION, openapi_url=None)
    app.state.services = services
    app.state.admin_guard = AdminGuard(admin_token)
    install_error_handlers(app)
    if services.audit is not None:
        app.add_middleware(AdminAuditMiddleware, audit=services.audit)  # inside the access log
    app.add_middleware(AccessLogMiddleware)
    app.include_router(routes_admin.router)
    app.include_router(routes_webhooks.router)
    app.include_router(routes_hash_bank.router)
    if services.redis is not None:  # the dashboard's users; its pages are added by dashboard.app
        app.include_router(routes_admin_users.router)
    return app
