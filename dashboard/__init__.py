"""The dashboard: server-rendered pages on the admin listener for moderators and operators (docs/dashboard.md).
It builds on `serve_app/` and the layers below and never imports `admin/`, which sits beside it on the same listener
(tests/test_layering.py; runtime/admin_server.py joins the two).

`install` adds it to the admin app: its routes, its static files (served by the service itself: no CDN), its error
pages, and the security headers every page carries.

- Who is signed in: `auth.py` (the session cookie, the user behind it, the user's role) and `csrf.py` (CSRF: the home
  of that rule, every part of it there or named there).
- The pages: `routes_login.py` (logging in and out, past the login brake), `routes_queue.py` (the moderators' queue,
  an item and its decision, their own settings), `routes_config.py` (the operators' keys, profiles and plans),
  `routes_widget.py` (a key's browser widget: its origins and this month's use), `routes_people.py` (dashboard users
  and everyone's own password), `routes_insight.py` (the operators' read-only pages: usage, the queue's health,
  Perspective feedback, the audit log) and `routes_adaptation.py` (each account's correction and a profile's
  threshold backtest, its chart drawn on the server).
- What the pages share: `pages.py` (renders the Jinja2 templates with the signed-in user, the CSRF token and the
  navigation), `forms.py` (form bodies read with a size bound), `errors.py` (the refusals as HTML pages, with the
  API's statuses), `review_view.py` (an item's scores beside its profile's thresholds), `reasons.py` (the reason codes
  a moderator gives with a decision) and `stores.py` (the dashboard's stores over the service's store connection).
- Beside the code, not packages: `templates/` (the Jinja2 templates) and `static/` (the pages' own script and styles).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import RedirectResponse, Response

from dashboard import (
    routes_adaptation, routes_config, routes_insight, routes_login, routes_people, routes_queue, routes_widget,
)
from dashboard.auth import PATH
from dashboard.errors import LoginRequired, PageError
from dashboard.pages import render
from dashboard.stores import DashboardStores

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Scripts and styles only from the service; images from the service and, with previews on, from any https host,
# since a queue item's preview is the client's own image_url, loaded by the moderator's browser (the service never
# fetches it; plain http never, so the network does not see what a moderator looks at). No framing, no form posting
# elsewhere, and no referrer sent to the image hosts.
def page_headers(image_previews: bool) -> dict[str, str]:
    images = "img-src 'self' https: data:" if image_previews else "img-src 'self' data:"
    return {
        "Content-Security-Policy": f"default-src 'self'; {images}; script-src 'self'; "
        "style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
    }


def install(app: FastAPI, stores: DashboardStores, image_previews: bool = True) -> None:
    """`image_previews`: whether item pages show the client's https image_url (MODERATION_DASHBOARD_IMAGE_PREVIEWS)."""
    app.state.dashboard = stores
    app.state.dashboard_image_previews = image_previews
    headers = page_headers(image_previews)
    app.mount(f"{PATH}/static", StaticFiles(directory=STATIC_DIR), name="dashboard-static")
    for module in (routes_login, routes_queue, routes_config, routes_people, routes_insight, routes_widget,
                   routes_adaptation):
        app.include_router(module.router)

    @app.get("/", include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse(f"{PATH}/", status_code=303)

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse(f"{PATH}/login", status_code=303)

    @app.exception_handler(PageError)
    async def _page_error(request: Request, exc: PageError) -> Response:
        response = render(request, "error.html", status=exc.status, message=exc.message)
        if exc.retry_after_s:
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.middleware("http")
    async def _headers(request: Request, call_next):
        response = await call_next(request)
        if request.url.path.startswith(PATH):
            for name, value in headers.items():
                response.headers.setdefault(name, value)
        return response
