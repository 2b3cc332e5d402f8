"""The admin API's API keys (`/admin/v1/keys`): create one for an account, plan and profile (its secret shown only in
that answer), read one, revoke one. A key's widget origins: admin/routes_widget.py."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, StringConstraints

from admin.guard import require_admin
from policy.names import NAME_PATTERN
from policy.types import ApiKey
from serve_app.audit_names import TARGET_STATE
from serve_app.auth import services
from serve_app.errors import InvalidRequest, NotFound, found

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account: Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
    profile: Name
    plan: Name


class CreatedKey(BaseModel):
    id: str
    key: str
    account: str
    profile: str
    plan: str


@router.post("/keys", response_model=CreatedKey, status_code=201)
async def create_key(body: KeyRequest, request: Request) -> CreatedKey:
    config = services(request).config
    if await config.get_plan(body.plan) is None:
        raise InvalidRequest(f"No plan named {body.plan!r}.")
    if await config.get_profile(body.profile) is None:
        raise InvalidRequest(f"No profile named {body.profile!r}.")
    record, secret = await config.create_key(body.account, body.profile, body.plan)
    setattr(request.state, TARGET_STATE, record.id)  # the audit log names the key by id; its secret is only here
    return CreatedKey(id=record.id, key=secret, account=record.account, profile=record.profile, plan=record.plan)


@router.get("/keys/{key_id}", response_model=ApiKey)
async def get_key(key_id: str, request: Request) -> ApiKey:
    return found(await services(request).config.get_key(key_id), NotFound(f"No key with id {key_id!r}."))


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: str, request: Request) -> Response:
    if not await services(request).config.revoke_key(key_id):
        raise NotFound(f"No key with id {key_id!r}.")
    await services(request).widget.set_origins(key_id, [])  # its pages' preflights are no longer answered
    return Response(status_code=204)
