"""The operators' page of a key's browser widget: the page origins it allows, and its widget use this month.

What the admin API's /admin/v1/keys/{id}/widget does, in a form (docs/widget.md).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from dashboard.auth import PATH, Viewer, operator
from dashboard.errors import PageError
from dashboard.csrf import checked_form
from dashboard.pages import render
from policy.widget_tokens import InvalidOrigin, normal_origins
from serve_app.auth import services
from store.keys.quota import month_of

router = APIRouter(prefix=PATH, include_in_schema=False)


@router.get("/keys/{key_id}/widget")
async def widget_page(request: Request, key_id: str, viewer: Viewer = Depends(operator)) -> Response:
    await _live_key(request, key_id)
    store, now = services(request).widget, time.time()
    return render(request, "key_widget.html", key_id=key_id, origins=await store.origins(key_id),
                  month=month_of(now)[0], use=await store.use(key_id, now))  # fmt: skip


@router.post("/keys/{key_id}/widget")
async def save_origins(request: Request, key_id: str, viewer: Viewer = Depends(operator)) -> Response:
    form = await checked_form(request, viewer.session)
    await _live_key(request, key_id)
    try:
        origins = normal_origins(form.text("origins").split())
    except InvalidOrigin as error:
        raise PageError(400, f"Not saved: {error}") from None
    await services(request).widget.set_origins(key_id, origins)
    return RedirectResponse(f"{PATH}/keys/{key_id}/widget?saved=1", status_code=303)


async def _live_key(request: Request, key_id: str) -> None:
    key = await services(request).config.get_key(key_id)
    if key is None or key.revoked:
        raise PageError(404, f"No live key with id {key_id}.")
