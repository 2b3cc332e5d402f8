"""Logging in and out. Both are in the audit log, and so is every wrong password (as a 401 of "unauthenticated",
naming the account tried); past the per-account limit of wrong passwords (store/sessions.py) the account's logins
answer 429 until its window ends."""

from __future__ import annotations

import hmac
import secrets

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from dashboard.auth import (
    COOKIE, PATH, Viewer, actor, clear_session_cookie, set_cookie, signed_in, stores,
)  # fmt: skip
from dashboard.errors import PageError
from dashboard.forms import CSRF_FIELD, checked_form, read_page_form
from dashboard.pages import render
from store.audit_log import ACTOR_STATE, TARGET_STATE

router = APIRouter(prefix=PATH, include_in_schema=False)
# Before there is a session, the login form's CSRF token is a double-submit cookie: another site's page can neither
# read it nor (SameSite=Strict) make the browser send it, so it cannot log a moderator in as someone else.
LOGIN_COOKIE = "moderation_login_csrf"
LOGIN_COOKIE_AGE_S = 3600


def _login_page(request: Request, status: int = 200, message: str = "", name: str = "") -> Response:
    token = secrets.token_urlsafe(24)
    response = render(request, "login.html", status=status, login_csrf=token, message=message, name=name)
    set_cookie(response, request, LOGIN_COOKIE, token, LOGIN_COOKIE_AGE_S)
    return response


@router.get("/login")
async def login_page(request: Request) -> Response:
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    form = await read_page_form(request)
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not hmac.compare_digest(form.get(CSRF_FIELD, "").encode(), expected.encode()):
        raise PageError(403, "The login form expired or came from another page: reload it and try again.")
    name, password = form.text("name"), form.get("password", "")
    setattr(request.state, TARGET_STATE, name[:64])  # the audit log names the account tried
    logins = stores(request).logins
    locked_s = await logins.locked_for_s(name)
    if locked_s:
        raise PageError(429, f"Too many wrong passwords for this account; try again in {locked_s} s.", locked_s)
    user = await stores(request).users.authenticate(name, password)
    if user is None:
        await logins.failed(name)
        return _login_page(request, 401, "Wrong name or password.", name)
    await logins.succeeded(name)
    token, _ = await stores(request).sessions.create(user.name)
    setattr(request.state, ACTOR_STATE, actor(user.name))
    response = RedirectResponse(f"{PATH}/", status_code=303)
    set_cookie(response, request, COOKIE, token, stores(request).sessions.ttl_s)
    response.delete_cookie(LOGIN_COOKIE, path=PATH)
    return response


@router.post("/logout")
async def logout(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    await checked_form(request, viewer.session)
    await stores(request).sessions.end(viewer.token)
    response = RedirectResponse(f"{PATH}/login", status_code=303)
    clear_session_cookie(response)
    return response
