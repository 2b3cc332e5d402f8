"""Dashboard users: operators create one (moderator or operator) with a first password, change its role and the
accounts a moderator works on, or delete one; everyone changes their own password. A new password, a new role and a
deletion end every session the user had (store/people/users.py generation); new accounts apply at the user's next request.
Changing one's own password needs the current one, braked per user as logins are (store/people/login_brake.py
take_password_check): a stolen session gets `MAX_WRONG_CURRENT_PASSWORDS` guesses per window, then 429.

The CLI does the same (`moderation-admin user-create`), for the first operator of an install. An operator cannot
delete their own account here, so an install is never left without the operator who is using it.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Path, Request
from starlette.responses import RedirectResponse, Response

from dashboard.auth import PATH, Viewer, open_session, operator, set_session_cookie, signed_in, stores
from dashboard.errors import PageError
from dashboard.csrf import checked_form
from dashboard.pages import render
from policy.names import NAME_PATTERN
from store.people.hash_pool import HashesBusy
from store.people.users import ROLES, InvalidAccounts, InvalidPassword, UserExists, check_password_rules
from serve_app.audit_names import SKIP_STATE, TARGET_STATE

router = APIRouter(prefix=PATH, include_in_schema=False)


@router.get("/users")
async def users_page(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    return render(request, "users.html", users=await stores(request).users.list(), roles=ROLES)


@router.post("/users")
async def create_user(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    form = await checked_form(request, viewer.session)
    name, role = form.text("name"), form.text("role")
    if not re.fullmatch(NAME_PATTERN, name) or role not in ROLES:
        raise PageError(400, "Not created: a name is letters, digits, '.', '_' or '-', and a role is one of "
                             f"{', '.join(ROLES)}.")  # fmt: skip
    setattr(request.state, TARGET_STATE, name)
    try:
        await stores(request).users.create(name, role, form.get("password", ""), accounts=_accounts(form.get("accounts", "")))
    except UserExists:
        raise PageError(409, f"Not created: a user named {name} exists already.") from None
    except (InvalidPassword, InvalidAccounts) as error:
        raise PageError(400, f"Not created: {error}") from None
    return RedirectResponse(f"{PATH}/users", status_code=303)


def _accounts(field: str) -> list[str]:
    """The form's accounts: one per line or comma-separated."""
    return [account for line in field.replace(",", "\n").splitlines() if (account := line.strip())]


@router.post("/users/{name}/assign")
async def assign_user(
    request: Request, name: str = Path(pattern=NAME_PATTERN), viewer: Viewer = Depends(operator)
) -> Response:
    """An operator sets a user's role and accounts. Not their own role: an install keeps the operator using it."""
    form = await checked_form(request, viewer.session)
    role = form.text("role")
    if role not in ROLES:
        raise PageError(400, f"Not changed: a role is one of {', '.join(ROLES)}.")
    if name == viewer.user.name and role != viewer.user.role:
        raise PageError(400, "You cannot change your own role while you use it.")
    try:
        changed = await stores(request).users.assign(name, role=role, accounts=_accounts(form.get("accounts", "")))
    except InvalidAccounts as error:
        raise PageError(400, f"Not changed: {error}") from None
    if changed is None:
        raise PageError(404, f"No user named {name}.")
    return RedirectResponse(f"{PATH}/users", status_code=303)


@router.post("/users/{name}/delete")
async def delete_user(
    request: Request, name: str = Path(pattern=NAME_PATTERN), viewer: Viewer = Depends(operator)
) -> Response:
    await checked_form(request, viewer.session)
    if name == viewer.user.name:
        raise PageError(400, "You cannot delete your own account while you use it.")
    if not await stores(request).users.delete(name):
        raise PageError(404, f"No user named {name}.")
    return RedirectResponse(f"{PATH}/users", status_code=303)


@router.get("/password")
async def password_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    return render(request, "password.html")


@router.post("/password")
async def change_password(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    """Any user changes their own password, with the current one (a session left open is not enough)."""
    form = await checked_form(request, viewer.session)
    users, new = stores(request).users, form.get("new", "")
    # The form's own mistakes first: they cost no hash and no guess.
    if new != form.get("again", ""):
        raise PageError(400, "The new password and its repetition differ; nothing was changed.")
    try:
        check_password_rules(new)
    except InvalidPassword as error:
        raise PageError(400, f"Not changed: {error}") from None
    await _check_current_password(request, viewer.user.name, form.get("current", ""))
    changed = await users.set_password(viewer.user.name, new)
    if changed is None:
        raise PageError(404, "Your account was deleted meanwhile.")
    # Every session of the old password has ended (a new generation), this one too: the browser gets a new one.
    await stores(request).sessions.end(viewer.token)
    token, session = await open_session(request, changed)
    response = render(request, "password.html", csrf_token=session.csrf_token,
                      notice="Your password was changed; your other sessions have ended.")  # fmt: skip
    set_session_cookie(response, request, token)
    return response


async def _check_current_password(request: Request, name: str, password: str) -> None:
    """403 for a wrong current password, 429 past the user's brake (kept out of the audit log, as a login's 429s
    are), 503 when the hash pool is full; each guess is taken before its hash, so simultaneous ones cannot pass."""
    brakes = stores(request).login_brake
    retry_after_s = await brakes.take_password_check(name)
    if retry_after_s:
        setattr(request.state, SKIP_STATE, True)
        raise PageError(429, f"Too many wrong current passwords; try again in {retry_after_s} s.", retry_after_s)
    try:
        user = await stores(request).users.authenticate(name, password)
    except HashesBusy as busy:
        await brakes.give_back_password_check(name)
        raise PageError(503, "The server is busy checking passwords; nothing was changed. Try again in a second.",
                        busy.retry_after_s) from None  # fmt: skip
    if user is None:
        raise PageError(403, "The current password is wrong; nothing was changed.")
    await brakes.give_back_password_check(name)
