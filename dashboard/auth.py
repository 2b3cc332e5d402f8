"""Who is signed in to the dashboard: the session cookie, the user behind it, the user's role.

The cookie holds only a random token (the store keeps its SHA-256, store/people/sessions.py); it is HttpOnly (no script
reads it), SameSite=Strict (no other site's page sends it) and Secure whenever the dashboard is reached over TLS
(directly, or behind a proxy that says so in X-Forwarded-Proto). Every state change also needs the session's CSRF
token in its form (dashboard/csrf.py, which names every part of CSRF).
How long a session lives: store/people/sessions.py, which names every part of session expiry. The brakes on guessing
a password: store/people/login_brake.py, which names every part of the login brake.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from starlette.responses import Response

from dashboard.errors import LoginRequired, PageError
from dashboard.stores import DashboardStores
from store.people.sessions import Session
from store.people.users import User
from serve_app.audit_names import ACTOR_STATE

COOKIE = "moderation_session"
PATH = "/dashboard"


@dataclass(frozen=True)
class Viewer:
    user: User
    session: Session
    token: str

    @property
    def is_operator(self) -> bool:
        return self.user.role == "operator"

    @property
    def scope(self) -> frozenset[str] | None:
        """The accounts whose review items this user sees and decides: None (every account) for an operator, the
        assigned ones for a moderator (none assigned: nothing)."""
        return None if self.is_operator else frozenset(self.user.accounts)

    def may_see(self, account: str) -> bool:
        return self.scope is None or account in self.scope


def stores(request: Request) -> DashboardStores:
    return request.app.state.dashboard


def actor(name: str) -> str:
    """How a dashboard user appears in the audit log."""
    return f"user:{name}"


async def signed_in(request: Request) -> Viewer:
    """Dependency of every dashboard page but the login page: any role."""
    token = request.cookies.get(COOKIE, "")
    session = await stores(request).sessions.get(token) if token else None
    user = await stores(request).users.get(session.user) if session else None
    # The same user as at login, not just the same name: deleted and re-created, or with a new password or role,
    # it is another generation, and every session opened before has ended.
    if session is None or user is None or (user.id, user.generation) != (session.user_id, session.generation):
        raise LoginRequired()
    viewer = Viewer(user=user, session=session, token=token)
    request.state.viewer = viewer
    setattr(request.state, ACTOR_STATE, actor(user.name))  # the audit log records this user's changes
    return viewer


async def operator(request: Request) -> Viewer:
    """Dependency of the operators' pages: a moderator is refused (403), whatever the URL they type."""
    viewer = await signed_in(request)
    if not viewer.is_operator:
        raise PageError(403, "This page is for operators; your account is a moderator's.")
    return viewer


def over_tls(request: Request) -> bool:
    """Reached over TLS, directly or through a proxy that says so. Trusting the header costs nothing: it can only
    make a cookie stricter (Secure)."""
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


def set_cookie(response: Response, request: Request, name: str, value: str, max_age_s: int) -> None:
    """Every cookie of the dashboard: HttpOnly, SameSite=Strict, only under /dashboard, Secure over TLS."""
    response.set_cookie(name, value, max_age=max_age_s, path=PATH, httponly=True, samesite="strict",
                        secure=over_tls(request))  # fmt: skip


async def open_session(request: Request, user: User) -> tuple[str, Session]:
    """A new session for `user`: its cookie value (for set_session_cookie) and the session."""
    return await stores(request).sessions.create(user.name, user.id, user.generation)


def set_session_cookie(response: Response, request: Request, token: str) -> None:
    set_cookie(response, request, COOKIE, token, stores(request).sessions.ttl_s)


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")
