"""CSRF: a page of another site can never make a signed-in browser change anything. Every part of it is here or
named here.

- Every cookie of the dashboard is SameSite=Strict and HttpOnly (`set_cookie` in dashboard/auth.py): no other site's
  page makes the browser send it, and no script reads it.
- Signed in: each session carries a random CSRF token of its own, made with the session (`Session.csrf_token`,
  `SessionStore.create` in store/people/sessions.py); every page puts it in its forms (`render` in
  dashboard/pages.py), and every state change reads its form through `checked_form` below, which refuses (403) a
  form without it.
- Before there is a session, the login form's token is a double-submit cookie (`LOGIN_COOKIE`): another site's page
  can neither read it nor make the browser send it, so it cannot log a moderator in as someone else
  (`new_login_token`, `set_login_cookie`, `check_login_token` below, used by dashboard/routes_login.py).
"""

from __future__ import annotations

import hmac
import secrets

from fastapi import Request
from starlette.responses import Response

from dashboard.auth import PATH, set_cookie
from dashboard.errors import PageError
from dashboard.forms import Form, read_page_form
from store.people.sessions import Session

CSRF_FIELD = "csrf_token"
LOGIN_COOKIE = "moderation_login_csrf"
LOGIN_COOKIE_AGE_S = 3600


def _same(sent: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(sent.encode(), expected.encode())


async def checked_form(request: Request, session: Session) -> Form:
    """The form, if it carries the session's CSRF token; 403 otherwise (a page of another site posting here)."""
    form = await read_page_form(request)
    if not _same(form.get(CSRF_FIELD, ""), session.csrf_token):
        raise PageError(403, "The form's CSRF token is missing or wrong: reload the page and try again.")
    return form


def new_login_token() -> str:
    return secrets.token_urlsafe(24)


def set_login_cookie(response: Response, request: Request, token: str) -> None:
    """The login page's token as its double-submit cookie; the page carries the same token in its form."""
    set_cookie(response, request, LOGIN_COOKIE, token, LOGIN_COOKIE_AGE_S)


def check_login_token(request: Request, form: Form) -> None:
    """403 unless the login form carries the token of its own cookie."""
    if not _same(form.get(CSRF_FIELD, ""), request.cookies.get(LOGIN_COOKIE, "")):
        raise PageError(403, "The login form expired or came from another page: reload it and try again.")


def forget_login_token(response: Response) -> None:
    response.delete_cookie(LOGIN_COOKIE, path=PATH)
