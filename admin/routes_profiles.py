"""The admin API's moderation profiles (`/admin/v1/profiles/{name}`): write one, read one. A profile written here
takes effect on the next request of every replica, because every request reads its key's profile from Redis
(store/keys/config.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from admin.guard import require_admin
from policy.names import NAME_PATTERN
from policy.types import Profile
from serve_app.auth import services
from serve_app.errors import NotFound, found

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


@router.put("/profiles/{name}", response_model=Profile)
async def put_profile(name: Annotated[str, Path(pattern=NAME_PATTERN)], profile: Profile, request: Request) -> Profile:
    profile = profile.model_copy(update={"name": name})
    await services(request).config.put_profile(profile)
    return profile


@router.get("/profiles/{name}", response_model=Profile)
async def get_profile(name: str, request: Request) -> Profile:
    return found(await services(request).config.get_profile(name), NotFound(f"No profile named {name!r}."))
