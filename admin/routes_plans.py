"""The admin API's plans (`/admin/v1/plans/{name}`): write one, read one. A plan written here takes effect on the next
request of every replica, because every request reads its key's plan from Redis (store/keys/config.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from admin.guard import require_admin
from policy.names import NAME_PATTERN
from policy.types import Plan
from serve_app.auth import services
from serve_app.errors import NotFound, found

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


@router.put("/plans/{name}", response_model=Plan)
async def put_plan(name: Annotated[str, Path(pattern=NAME_PATTERN)], plan: Plan, request: Request) -> Plan:
    plan = plan.model_copy(update={"name": name})
    await services(request).config.put_plan(plan)
    return plan


@router.get("/plans/{name}", response_model=Plan)
async def get_plan(name: str, request: Request) -> Plan:
    return found(await services(request).config.get_plan(name), NotFound(f"No plan named {name!r}."))
