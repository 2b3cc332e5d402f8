"""The public `/docs` page (Swagger UI) with its script and styles served by the service itself.

FastAPI's default page loads Swagger UI from a CDN, which leaves it blank on an install without internet. The files
come from the `swagger-ui-bundle-v2` wheel (Swagger UI's own dist, Apache-2.0) and are served under `ASSETS`. ReDoc
(FastAPI's `/redoc`, also CDN-loaded) is not offered.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs-assets"


def install_docs(app: FastAPI) -> None:
    """For an app made with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url, title=f"{app.title} - docs",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )  # fmt: skip
