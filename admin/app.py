"""The admin API's FastAPI app: plans, profiles, keys (with their widget origins), usage, reviews, audit log, webhooks, hash banks, each site's labels, correction and backtest, users and
the review queue's Prometheus metrics, all behind the admin token (admin/guard.py).

Served only on the admin listener (runtime/admin_server.py), beside the dashboard's pages; never on the public port.
"""

from __future__ import annotations

from fastapi import FastAPI

from admin import metrics, routes, routes_adaptation, routes_hash_bank, routes_users, routes_webhooks, routes_widget
from admin.audit_middleware import AdminAuditMiddleware
from admin.guard import AdminGuard
from serve_app.access_log import AccessLogMiddleware
from serve_app.app import API_VERSION
from serve_app.errors import install_error_handlers
from serve_app.services import Services


def create_admin_app(services: Services, admin_token: str) -> FastAPI:
    """The admin API alone, for its own listener (loopback by default): never on the public port. The listener
    serves the dashboard beside it (runtime/admin_server.py)."""
    app = FastAPI(title="Content moderation admin API", version=API_VERSION, openapi_url=None)
    app.state.services = services
    app.state.admin_guard = AdminGuard(admin_token)
    install_error_handlers(app)
    if services.audit is not None:
        app.add_middleware(AdminAuditMiddleware, audit=services.audit)  # inside the access log
    app.add_middleware(AccessLogMiddleware)
    app.include_router(routes.router)
    app.include_router(routes_webhooks.router)
    app.include_router(routes_hash_bank.router)
    app.include_router(routes_widget.router)
    app.include_router(routes_adaptation.router)
    if services.redis is not None:  # the dashboard's users and the queue's metrics; the pages: runtime/admin_server.py
        app.include_router(routes_users.router)
        app.include_router(metrics.router)
    return app
