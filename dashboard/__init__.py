"""The dashboard: server-rendered pages on the admin listener for moderators and operators (docs/dashboard.md).

`install` adds it to the admin app: its routes, its static files (served by the service itself: no CDN), its error
pages, and the security headers every page carries.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import RedirectResponse, Response

from dashboard import routes_config, routes_insight, routes_login, routes_people, routes_queue, routes_widget
from dashboard.auth import PATH
from dashboard.errors import LoginRequired, PageError
from dashboard.pages import render
from dashboard.stores import DashboardStores

STATIC_DIR = Path(__file__).resolve().parent / "static"
# Scripts and styles only from the service; images from anywhere over http(s), since a queue item's preview is the
# client's own image_url, loaded by the moderator's browser (the service never fetches it). No framing, no form
# posting elsewhere, and no referrer sent to the image hosts.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' https: http: data:; script-src 'self'; "
    "style-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def install(app: FastAPI, stores: DashboardStores) -> None:
    app.state.dashboard = stores
    app.mount(f"{PATH}/static", StaticFiles(directory=STATIC_DIR), name="dashboard-static")
    for module in (routes_login, routes_queue, routes_config, routes_people, routes_insight, routes_widget):
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
            for name, value in PAGE_HEADERS.items():
                response.headers.setdefault(name, value)
        return response
