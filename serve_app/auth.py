"""Who is calling: the API key, its plan and profile, the per-key rate limit, and for a moderation request its
admission (its first quota unit and work slot), all in one store round trip."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from fastapi import Request

from moderation.errors import QuotaExceeded, TooManyInFlight
from moderation.flow import Caller, FirstUnit, first_unit_held, give_back_first_unit, new_slot_id
from policy.types import ContentKind
from store.keys.config import Authorized, Unconfigured
from store.keys.quota import Admission, Taken, WorkSlot
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
    """Dependency of the public endpoints that moderate nothing: 401 without a live key, 429 past its rate."""
    return await _caller(request, bearer_token(request))


def admitted_caller(kind: ContentKind | None = None, *, key_in_query: bool = False) -> Callable:
    """The dependency of a moderation endpoint (to use with `scope="function"`): as `authenticated_caller`, and in
    the same store round trip the request's first quota unit and its slot of the account's work in progress (402
    `quota_exceeded`, 429 `too_many_requests_in_flight`), unless the key's plan does not cover `kind` (None: an
    endpoint for either). The unit goes back when the request then fails, the slot when it ends
    (`first_unit_held`); a request of several units takes the others in the flow. `key_in_query`: Perspective's
    way, the key in `?key=` (the access log records the path only) or the Bearer header."""

    async def admitted(request: Request) -> AsyncIterator[Caller]:
        secret = _key_param(request) if key_in_query else bearer_token(request)
        caller = await _caller(request, secret, admit=kind or "")
        async with first_unit_held(services(request).quota, caller):
            yield caller

    return admitted


async def key_param_caller(request: Request) -> Caller:
    """Perspective's way: the key in `?key=` (the access log records the path only), or the Bearer header."""
    return await _caller(request, _key_param(request))


def _key_param(request: Request) -> str | None:
    return request.query_params.get("key") or bearer_token(request)


async def _caller(request: Request, secret: str | None, *, admit: str | None = None) -> Caller:
    # One Redis round trip for the key, its plan and profile and the rate token (and, with `admit`, the first unit
    # and slot for that kind of content, "" for either). They are read fresh on every request, never cached here,
    # so admin changes and revokes hold from the next request.
    if not secret:
        raise Unauthorized()
    quota = services(request).quota
    admission = quota.admission(new_slot_id(), admit) if admit is not None else None
    try:
        found = await services(request).config.authorize(secret, admission=admission)
    except BaseException:
        if admission is not None:
            quota.not_admitted(admission)
        raise
    if found is None:
        raise Unauthorized()
    first_unit = _first_unit(found, admission)
    if isinstance(found, Unconfigured):
        # The key points at a plan or profile that is gone or cannot be read (logged): refuse rather than guess.
        if first_unit is not None:  # the store could read its plan: give back what it took
            await give_back_first_unit(quota, found.key.account, first_unit)
        key = found.key
        raise StoreUnavailable(f"The key's plan or profile is not configured or cannot be read ({key.plan}, "
                               f"{key.profile}).")  # fmt: skip
    if found.retry_after_s > 0:
        await count_rate_refusal(services(request), found.key.account)
        raise RateLimited(retry_after_s=found.retry_after_s)
    request.state.account = found.key.account
    if found.taken is Taken.NO_QUOTA:
        raise QuotaExceeded()
    if found.taken is Taken.TOO_MANY_IN_FLIGHT:
        raise TooManyInFlight()
    return Caller(key=found.key, plan=found.plan, profile=found.profile, first_unit=first_unit)


def _first_unit(found: Authorized | Unconfigured, admission: Admission | None) -> FirstUnit | None:
    """The first unit and slot the authorizing step took; None when it took none (not asked, refused, or a plan
    record it could not read the numbers of: the flow then takes them itself)."""
    if admission is None or found.taken is not Taken.TAKEN:
        return None
    # The slot's cap mattered only to the step that took it; an unreadable plan's slot is only ever given back.
    max_in_flight = found.plan.max_in_flight if isinstance(found, Authorized) else 1
    return FirstUnit(admission.charged_at, WorkSlot(admission.slot_id, max_in_flight))
