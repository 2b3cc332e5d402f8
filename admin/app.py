"""The admin API's FastAPI app: one router per resource, plans (`routes_plans.py`), profiles (`routes_profiles.py`),
keys (`routes_keys.py`, their widget origins `routes_widget.py`), usage (`routes_usage.py`), score suggestions
(`routes_feedback.py`), reviews (`routes_reviews.py`), the audit log (`routes_audit.py`), webhooks
(`routes_webhooks.py`), hash banks (`routes_hash_bank.py`), each site's labels, correction and backtest
(`routes_adaptation.py`), users (`routes_users.py`) and the review queue's Prometheus metrics (`metrics.py`), all
behind the admin token (admin/guard.py).

Served only on the admin listener (runtime/admin_server.py), beside the dashboard's pages; never on the public port.
"""

from __future__ import annotations

from fastapi import FastAPI

from admin import (
    metrics, routes_adaptation, routes_audit, routes_feedback, routes_hash_bank, routes_keys, routes_plans,
    routes_profiles, routes_reviews, routes_usage, routes_users, routes_webhooks, routes_widget,
)  # fmt: skip
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
    # One router per resource (no two of their routes match the same path and method: the order changes nothing).
    resources = (routes_plans, routes_profiles, routes_keys, routes_usage, routes_feedback, routes_reviews,
                 routes_audit, routes_webhooks, routes_hash_bank, routes_widget, routes_adaptation)  # fmt: skip
    for resource in resources:
        app.include_router(resource.router)
    if services.redis is not None:  # the dashboard's users and the queue's metrics; the pages: runtime/admin_server.py
        app.include_router(routes_users.router)
        app.include_router(metrics.router)
    return app
