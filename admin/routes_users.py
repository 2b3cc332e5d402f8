"""The admin API's dashboard users (`/admin/v1/users`): how the first operator of an install is made, by the CLI
(`moderation-admin users create`) with the admin token. Operators then manage users in the dashboard as well.
`PATCH /users/{name}` sets a user's role or the accounts a moderator works on (store/people/users.py); a new role ends the
user's sessions.

A password goes in the request body only (the audit log never reads bodies) and is stored as a scrypt hash
(store/people/users.py); no answer ever carries it or its hash.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, ConfigDict, StringConstraints

from policy.names import NAME_PATTERN
from store.people.users import InvalidAccounts, InvalidPassword, Role, User, UserExists, UserStore
from serve_app.audit_names import TARGET_STATE
from admin.guard import require_admin
from serve_app.auth import services
from serve_app.errors import InvalidRequest, NotFound, found

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])
UserName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class NewUser(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: UserName
    role: Role
    password: str
    accounts: list[str] = []


class UserChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role | None = None
    accounts: list[str] | None = None  # the whole list: it replaces the user's accounts


class UserView(BaseModel):
    name: str
    role: Role
    created_at: float
    accounts: list[str]


class UserList(BaseModel):
    users: list[UserView]


def _view(user: User) -> UserView:
    return UserView(name=user.name, role=user.role, created_at=user.created_at, accounts=user.accounts)


def _users(request: Request) -> UserStore:
    return UserStore(services(request).redis)


@router.post("/users", response_model=UserView, status_code=201)
async def create_user(body: NewUser, request: Request) -> UserView:
    setattr(request.state, TARGET_STATE, body.name)
    try:
        return _view(await _users(request).create(body.name, body.role, body.password, accounts=body.accounts))
    except UserExists:
        raise InvalidRequest(f"A user named {body.name!r} exists already.") from None
    except (InvalidPassword, InvalidAccounts) as error:
        raise InvalidRequest(str(error)) from None


@router.patch("/users/{name}", response_model=UserView)
async def change_user(name: Annotated[str, Path(pattern=NAME_PATTERN)], body: UserChange, request: Request) -> UserView:
    try:
        changed = await _users(request).assign(name, role=body.role, accounts=body.accounts)
    except InvalidAccounts as error:
        raise InvalidRequest(str(error)) from None
    return _view(found(changed, NotFound(f"No user named {name!r}.")))


@router.get("/users", response_model=UserList)
async def list_users(request: Request) -> UserList:
    return UserList(users=[_view(user) for user in await _users(request).list()])


@router.delete("/users/{name}", status_code=204)
async def delete_user(name: Annotated[str, Path(pattern=NAME_PATTERN)], request: Request) -> Response:
    if not await _users(request).delete(name):
        raise NotFound(f"No user named {name!r}.")
    return Response(status_code=204)
