"""Logging in and out (docs/dashboard.md, "Logging in").

A login name is checked against the user-name rule first: a malformed or over-long one is refused (400) before any
hash or store write. Then the attempt is taken past the two brakes of store/people/login_brake.py, in one store step that
counts it as a wrong password before its hash runs: past the per-address limit of wrong passwords the address's logins
answer 429 until its window ends; past the per-name limit, the name answers 429 to addresses that have failed in
their current window (a fresh address always may try). Only then is the password hashed, in the process's hash pool
(store/people/hash_pool.py): when that is full the attempt is given back and the answer is 503 with Retry-After (the
same request may be retried). A right password gives its attempt back too.

The audit log records logins, logouts, and each brake as it engages (once per window per address, and per name when
that name is a user's): never each wrong password, so a guesser cannot push real entries out of the bounded log,
and never a typed name that is no user's.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from dashboard.auth import PATH, Viewer, actor, clear_session_cookie, open_session, set_session_cookie, signed_in, stores
from dashboard.csrf import check_login_token, checked_form, forget_login_token, new_login_token, set_login_cookie
from dashboard.errors import PageError
from dashboard.forms import read_page_form
from dashboard.pages import render
from serve_app.audit_names import ACTOR_STATE, SKIP_STATE, TARGET_STATE
from serve_app.client_address import limit_key_of
from store.people.hash_pool import HashesBusy
from store.people.login_brake import LoginAttempt
from store.people.users import valid_login_name

router = APIRouter(prefix=PATH, include_in_schema=False)
BRAKE_MESSAGES = {
    "address": "Too many wrong passwords from your address; try again in {s} s.",
    "name": "Too many wrong passwords for this account; try again in {s} s (or from another network).",
}
HASHES_BUSY_MESSAGE = "Too many logins at this moment; nothing was checked. Try again in a second."


def _login_page(request: Request, status: int = 200, message: str = "", name: str = "") -> Response:
    token = new_login_token()  # the form's CSRF token (dashboard/csrf.py)
    response = render(request, "login.html", status=status, login_csrf=token, message=message, name=name)
    set_login_cookie(response, request, token)
    return response


def client_address(request: Request) -> str:
    """Whom the per-address brake counts: the peer (the listener is reached directly; docs/dashboard.md says so for
    proxies), an IPv6 peer by its /64, as every per-address limit counts (serve_app/client_address.py)."""
    return limit_key_of(request.client.host) if request.client else "unknown"


@router.get("/login")
async def login_page(request: Request) -> Response:
    return _login_page(request)


@router.post("/login")
async def login(request: Request) -> Response:
    form = await read_page_form(request)
    check_login_token(request, form)
    name, password = form.text("name"), form.get("password", "")
    if not valid_login_name(name):
        setattr(request.state, SKIP_STATE, True)
        raise PageError(400, "A user name is 1 to 64 letters, digits, '.', '_' or '-'.")
    brake = stores(request).login_brake
    attempt = await brake.take(name, client_address(request))
    if attempt.retry_after_s:
        raise PageError(429, BRAKE_MESSAGES[attempt.reason].format(s=attempt.retry_after_s), attempt.retry_after_s)
    try:
        user = await stores(request).users.authenticate(name, password)
    except HashesBusy as busy:
        await brake.give_back(attempt)
        raise PageError(503, HASHES_BUSY_MESSAGE, busy.retry_after_s) from None
    if user is None:
        await _failed(request, attempt)
        return _login_page(request, 401, "Wrong name or password.", name)
    await brake.succeeded(attempt)
    setattr(request.state, TARGET_STATE, user.name)
    setattr(request.state, ACTOR_STATE, actor(user.name))
    token, _ = await open_session(request, user)
    response = RedirectResponse(f"{PATH}/", status_code=303)
    set_session_cookie(response, request, token)
    forget_login_token(response)
    return response


async def _failed(request: Request, attempt: LoginAttempt) -> None:
    """A wrong password (counted already, when its attempt was taken) reaches the audit log only when it engages a
    brake, naming only a real user."""
    real_user = attempt.engages.name and await stores(request).users.get(attempt.name) is not None
    if real_user:
        setattr(request.state, TARGET_STATE, attempt.name)
    elif attempt.engages.address:
        setattr(request.state, TARGET_STATE, "")
    else:
        setattr(request.state, SKIP_STATE, True)


@router.post("/logout")
async def logout(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    await checked_form(request, viewer.session)
    await stores(request).sessions.end(viewer.token)
    response = RedirectResponse(f"{PATH}/login", status_code=303)
    clear_session_cookie(response)
    return response
