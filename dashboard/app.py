"""The admin listener's app: the admin API (serve_app.app.create_admin_app) with the dashboard's pages beside it."""

from __future__ import annotations

from fastapi import FastAPI

from dashboard import install
from dashboard.stores import DashboardStores
from serve_app.app import create_admin_app
from serve_app.services import Services


def create_admin_listener_app(services: Services, admin_token: str) -> FastAPI:
    app = create_admin_app(services, admin_token)
    if services.redis is not None:  # Services without a store connection of their own (tests) get no dashboard
        install(app, DashboardStores.over(services.redis))
    return app
