"""The admin API's widget routes: the page origins a key allows for the browser widget, and the key's widget use.

On the admin listener only, behind the admin token. docs/widget.md describes the widget.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from admin.guard import require_admin
from policy.widget_tokens import MAX_ORIGINS_PER_KEY, InvalidOrigin, normal_origins
from serve_app.auth import services
from serve_app.errors import InvalidRequest, NotFound
from store.keys.quota import month_of

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


class WidgetOrigins(BaseModel):
    model_config = ConfigDict(extra="forbid")
    origins: list[str] = Field(max_length=MAX_ORIGINS_PER_KEY)


class WidgetSettings(BaseModel):
    key_id: str
    origins: list[str]
    month: str
    use: dict[str, int]  # this UTC month: tokens minted, checks, checks refused for origin, spent token, address


@router.get("/keys/{key_id}/widget", response_model=WidgetSettings)
async def get_widget(key_id: str, request: Request) -> WidgetSettings:
    return await _settings_of(request, key_id)


@router.put("/keys/{key_id}/widget", response_model=WidgetSettings)
async def put_widget(key_id: str, body: WidgetOrigins, request: Request) -> WidgetSettings:
    """The key's allowed origins become exactly these (an empty list turns the widget off for the key); tokens
    already minted are held to the new list from their next check."""
    await _live_key(request, key_id)
    try:
        origins = normal_origins(body.origins)
    except InvalidOrigin as exc:
        raise InvalidRequest(str(exc)) from None
    await services(request).widget.set_origins(key_id, origins)
    return await _settings_of(request, key_id)


async def _live_key(request: Request, key_id: str) -> None:
    key = await services(request).config.get_key(key_id)
    if key is None or key.revoked:
        raise NotFound(f"No live key with id {key_id!r}.")


async def _settings_of(request: Request, key_id: str) -> WidgetSettings:
    await _live_key(request, key_id)
    store, now = services(request).widget, time.time()
    return WidgetSettings(key_id=key_id, origins=await store.origins(key_id), month=month_of(now)[0],
                          use=await store.use(key_id, now))  # fmt: skip
