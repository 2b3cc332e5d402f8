"""Who is calling: the API key, its plan and profile, and the per-key rate limit."""

from __future__ import annotations

from fastapi import Request

from moderation.flow import Caller
from store.config import Unconfigured
from serve_app.errors import RateLimited, StoreUnavailable, Unauthorized
from serve_app.services import Services, count_rate_refusal


def services(request: Request) -> Services:
    return request.app.state.services


def bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def authenticated_caller(request: Request) -> Caller:
    """Dependency of every public endpoint: 401 without a live key, 429 past its rate."""
    return await _caller(request, bearer_token(request))


async def key_param_caller(request: Request) -> Caller:
    """Perspective's way: the key in `?key=` (the access log records the path only), or the Bearer header."""
    return await _caller(request, request.query_params.get("key") or bearer_token(request))


async def _caller(request: Request, secret: str | None) -> Caller:
    # One Redis round trip for the key, its plan and profile and the rate token. They are read fresh
    # on every request, never cached here, so admin changes and revokes hold from the next request.
    found = await services(request).config.authorize(secret) if secret else None
    if found is None:
        raise Unauthorized()
    if isinstance(found, Unconfigured):
        # The key points at a plan or profile that is gone or cannot be read (logged): refuse rather than guess.
        key = found.key
        raise StoreUnavailable(f"The key's plan or profile is not configured or cannot be read ({key.plan}, "
                               f"{key.profile}).")  # fmt: skip
    if found.retry_after_s > 0:
        await count_rate_refusal(services(request), found.key.account)
        raise RateLimited(retry_after_s=found.retry_after_s)
    request.state.account = found.key.account
    return Caller(key=found.key, plan=found.plan, profile=found.profile)
