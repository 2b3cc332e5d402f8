"""The operators' read-only pages: usage per account, the queue's health, Perspective feedback, the audit log."""

from __future__ import annotations

import re
import time

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from dashboard.auth import PATH, Viewer, actor, operator, signed_in, stores
from dashboard.errors import PageError
from dashboard.pages import render
from store.keys.listing import list_live_keys
from store.keys.quota import month_of
from store.keys.rate_limit import RateRefusals
from serve_app.auth import services
from policy.names import STREAM_ID_PATTERN

router = APIRouter(prefix=PATH, include_in_schema=False)
AUDIT_PAGE = 100
FEEDBACK_SHOWN = 20


@router.get("/accounts")
async def accounts_page(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    """One row per account that has a live key: this month's quota units and rate refusals, today's reports, its
    pending review items, and its latest Perspective score suggestions."""
    svc, now = services(request), time.time()
    accounts = sorted({key.account for key in await list_live_keys(svc.redis)})
    health = await stores(request).stats.health(now)
    refusals = RateRefusals(svc.redis)
    rows = []
    for account in accounts:
        rows.append({
            "account": account, "used": await svc.quota.quota_used(account, now),
            "rate_refusals": await refusals.this_month(account, now),
            "reports_today": await svc.reviews.daily_reports(account, now),
            "pending": health.pending_by_account.get(account, 0),
            "feedback": await svc.feedback.list(account, limit=FEEDBACK_SHOWN) if svc.feedback else [],
        })  # fmt: skip
    return render(request, "accounts.html", rows=rows, month=month_of(now)[0], health=health)


@router.get("/audit")
async def audit_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    """Every decision and operator action, newest first (store/people/audit_log.py). An operator sees every entry; a
    moderator sees the decisions on their accounts' items (so a decision's author is never a secret inside the team
    of an account) and their own actions, nothing of other accounts and no operator changes."""
    before = request.query_params.get("before") or None
    if before is not None and not re.fullmatch(STREAM_ID_PATTERN, before):
        raise PageError(400, "The audit page's cursor is not an entry id.")
    audit = services(request).audit
    if audit is None:
        raise PageError(404, "This listener keeps no audit log.")
    return render(request, "audit.html", page=await audit.page(limit=AUDIT_PAGE, before=before, visible=_visible(viewer)))


def _visible(viewer: Viewer):
    if viewer.is_operator:
        return None
    me = actor(viewer.user.name)
    return lambda entry: entry.actor == me or (entry.account != "" and viewer.may_see(entry.account))
