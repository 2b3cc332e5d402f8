"""The admin API's routes for each site's own line (moderation/site_adaptation.py): the account's correction (its
status, a refit, a reset) and a profile's threshold backtest on the account's labels (read it, apply it).

On the admin listener only, behind the admin token; every change is an entry of the admin audit log (the middleware
writes one per non-GET call), so applying suggested thresholds is one audited action. Like other operators' changes
(a profile's), the entries are not shown to the account's moderators.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from admin.guard import require_admin
from moderation.site_adaptation import NoSuchProfile, NoSuggestion, SiteAdaptation
from policy.names import NAME_PATTERN
from serve_app.auth import services
from serve_app.errors import ErrorKind, NotFound

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])

ProfileName = Annotated[str, Path(pattern=NAME_PATTERN)]
NothingToApply = ErrorKind(409, "no_suggested_thresholds", "The backtest suggests no thresholds yet.")


def _site(request: Request) -> SiteAdaptation:
    found = services(request)
    if found.labels is None or found.corrections is None:
        raise NotFound("This admin API keeps no labels.")
    return SiteAdaptation(found.labels, found.corrections, found.config)


@router.get("/accounts/{account}/text-adaptation")
async def adaptation_status(account: str, request: Request) -> dict:
    """The account's last fit: live or not and why, its labels and cross-validated figures (never its weights)."""
    return await _site(request).status(account)


@router.post("/accounts/{account}/text-adaptation/refit")
async def refit(
    account: str, request: Request, profile: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None
) -> dict:
    """Fits the account's correction now on all its labels (synchronous) and answers its status with the backtest
    of `profile` (default: the profile that served most of its labels), suggested thresholds included."""
    return await _site(request).refit(account, profile)


@router.delete("/accounts/{account}/text-adaptation", status_code=204)
async def reset(account: str, request: Request) -> Response:
    """Erases the account's labels and correction; its answers are the served scores again within seconds."""
    await _site(request).reset(account)
    return Response(status_code=204)


@router.get("/accounts/{account}/profiles/{profile}/backtest")
async def read_backtest(account: str, profile: ProfileName, request: Request) -> dict:
    """The profile's estimated recall and benign-flagged share at its thresholds on the account's labels (with
    the live correction), the thresholds that would meet its `target_benign_flagged`, and the curve between."""
    try:
        found = await _site(request).backtest(account, profile)
    except NoSuchProfile:
        raise NotFound(f"No profile named {profile!r}.") from None
    return {"account": account, "profile": profile, **found.document()}


@router.post("/accounts/{account}/profiles/{profile}/backtest/apply")
async def apply_backtest(account: str, profile: ProfileName, request: Request) -> dict:
    """Writes the backtest's suggested thresholds into the profile as toxic's review and block thresholds. The
    profile is shared by every key pinned to it."""
    try:
        moved = await _site(request).apply_suggested_thresholds(account, profile)
    except NoSuchProfile:
        raise NotFound(f"No profile named {profile!r}.") from None
    except NoSuggestion as exc:
        raise NothingToApply(exc.reason) from None
    return {"account": account, "profile": moved.model_dump(mode="json")}
