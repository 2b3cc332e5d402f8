"""The moderators' pages: the queue (oldest first, filtered), an item with what is needed to decide it, the decision
("decide and next"), and the moderator's own settings.

Opening an item changes nothing (no state change on a GET: a page or preview another site controls cannot make a
moderator's browser claim items). The item page's "Claim" button (a CSRF-checked POST) claims it for a few minutes
(store/review/claims.py), and deciding claims it too, in the same request; an item another moderator holds is shown
without its decision buttons, and a decision posted for it anyway is refused (409). A decision is final
(ReviewQueue.decide) and records who made it and why.

A moderator sees and decides only the items of the accounts an operator assigned them: another account's item
answers 404, exactly as an item that does not exist, so its existence is not revealed. Operators see every account.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from dashboard.auth import PATH, Viewer, signed_in, stores
from dashboard.errors import PageError
from dashboard.csrf import checked_form
from dashboard.pages import render
from dashboard.reasons import REASONS, preselected
from dashboard.review_view import score_rows
from store.review.browse import QueueFilter
from serve_app.audit_names import ACCOUNT_STATE
from store.review.queue import ReviewAlreadyDecided, ReviewItemNotFound
from policy.types import IMAGE_CATEGORIES, TEXT_CATEGORIES, ReviewItem
from serve_app.auth import services

router = APIRouter(prefix=PATH, include_in_schema=False)
KINDS = ("image", "text", "report")
QUEUE_REASONS = ("model_flagged", "report_threshold", "audit")
# Why an item is queued, as its page says it. An audit is not a flag: the profile allowed it, and it is one of a
# random sample (its `audit_rate`) the moderator's decision turns into an unbiased label (adaptation/labels.py).
REASON_NAMES = {"model_flagged": "model flag", "report_threshold": "user reports",
                "audit": "audit (random sample of unreviewed content)"}  # fmt: skip
QUEUE_PAGE = 50


def queue_filter(request: Request, viewer: Viewer) -> QueueFilter:
    """The filters of the page's query, inside the viewer's accounts; a value outside its choices is a 400, not an
    empty queue."""
    query = request.query_params
    kind, reason, category = query.get("kind", ""), query.get("reason", ""), query.get("category", "")
    if kind not in ("", *KINDS) or reason not in ("", *QUEUE_REASONS):
        raise PageError(400, "Unknown content kind or reason in the filter.")
    if category not in ("", *IMAGE_CATEGORIES, *TEXT_CATEGORIES):
        raise PageError(400, "Unknown category in the filter.")
    try:
        min_age_h = float(query.get("min_age_h") or 0)
    except ValueError:
        raise PageError(400, "The age filter is a number of hours.") from None
    if not 0 <= min_age_h <= 24 * 366:
        raise PageError(400, "The age filter is between 0 hours and a year.")
    account = query.get("account", "").strip()[:200]
    return QueueFilter(account=account, kind=kind, category=category, reason=reason, min_age_s=min_age_h * 3600,
                       scope=viewer.scope)  # fmt: skip


def filter_query(request: Request) -> str:
    """The filters as a query string, carried from page to page so "next" stays inside them."""
    keep = {name: request.query_params[name] for name in ("account", "kind", "category", "reason", "min_age_h")
            if request.query_params.get(name)}  # fmt: skip
    return urlencode(keep)


def item_url(item_id: int, query: str) -> str:
    return f"{PATH}/items/{item_id}" + (f"?{query}" if query else "")


@router.get("/")
async def queue_page(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    chosen = queue_filter(request, viewer)
    items = await stores(request).browser.pending(chosen, limit=QUEUE_PAGE)
    holders = await stores(request).claims.holders([item.id for item in items])
    rows = [(item, score_rows(item)[:1], holders.get(item.id)) for item in items]
    return render(request, "queue.html", rows=rows, chosen=chosen, query=filter_query(request), kinds=KINDS,
                  reasons=QUEUE_REASONS, categories=(*IMAGE_CATEGORIES, *TEXT_CATEGORIES),
                  min_age_h=request.query_params.get("min_age_h", ""))  # fmt: skip


async def _item_or_404(request: Request, item_id: int, viewer: Viewer) -> ReviewItem:
    """The item, if the viewer may see it; another account's item is the same 404 as a missing one."""
    item = await services(request).reviews.get(item_id)
    if item is None or not viewer.may_see(item.account):
        raise PageError(404, f"No review item {item_id}: it was never queued or its retention is over.")
    setattr(request.state, ACCOUNT_STATE, item.account)  # the audit log shows its entry to that account's moderators
    return item


@router.get("/items/{item_id}")
async def item_page(request: Request, item_id: int, viewer: Viewer = Depends(signed_in)) -> Response:
    item = await _item_or_404(request, item_id, viewer)
    dash = stores(request)
    holder = await dash.claims.holder(item.id) if item.status == "pending" else None
    chosen, query = queue_filter(request, viewer), filter_query(request)
    following = await dash.browser.next_after(item.id, chosen)
    previous = await dash.browser.previous_before(item.id, chosen)
    profile = await services(request).config.get_profile(item.profile) if item.profile else None
    categories = score_rows(item, profile)
    top_category = categories[0].name if categories else None
    return render(
        request, "item.html", item=item, holder=holder, mine=holder == viewer.user.name,
        categories=categories, reports=await dash.browser.report_count(item.account, item.reference),
        reasons=REASONS, chosen_reason={status: preselected(status, top_category) for status in REASONS},
        reason_name=REASON_NAMES.get(item.reason, item.reason),
        query=query, next_url=item_url(following.id, query) if following else "",
        previous_url=item_url(previous.id, query) if previous else "",
        safe_image_url=preview_url(item.image_url, request.app.state.dashboard_image_previews),
    )  # fmt: skip


def preview_url(url: str | None, previews_on: bool) -> str:
    """Only https URLs are handed to the moderator's browser as an image source, and none when previews are off
    (MODERATION_DASHBOARD_IMAGE_PREVIEWS): a plain-http one would tell the network what the moderator looks at."""
    return url if previews_on and url and url.lower().startswith("https://") else ""


@router.post("/items/{item_id}/claim")
async def claim(request: Request, item_id: int, viewer: Viewer = Depends(signed_in)) -> Response:
    """Takes (or renews) the claim on a pending item, then shows it; someone else's claim is left as it is."""
    await checked_form(request, viewer.session)
    item = await _item_or_404(request, item_id, viewer)
    if item.status == "pending":
        await stores(request).claims.claim(item.id, viewer.user.name)
    return RedirectResponse(item_url(item.id, filter_query(request)), status_code=303)


# Two routes, not one with the verdict as a parameter: the audit log records the route template, so each entry says
# whether the item was approved or rejected.
@router.post("/items/{item_id}/approve")
async def approve(request: Request, item_id: int, viewer: Viewer = Depends(signed_in)) -> Response:
    return await _decide(request, item_id, "approved", viewer)


@router.post("/items/{item_id}/reject")
async def reject(request: Request, item_id: int, viewer: Viewer = Depends(signed_in)) -> Response:
    return await _decide(request, item_id, "rejected", viewer)


async def _decide(
    request: Request, item_id: int, status: Literal["approved", "rejected"], viewer: Viewer
) -> Response:
    """Decides, then opens the next pending item in the same filters (or the queue when none is left)."""
    form = await checked_form(request, viewer.session)
    reason_code = form.text("reason_code")
    if reason_code not in REASONS[status]:
        raise PageError(400, f"Choose a reason for the decision: one of {', '.join(REASONS[status])}.")
    await _item_or_404(request, item_id, viewer)
    dash = stores(request)
    # Deciding claims the item in the same step that checks nobody else holds it.
    claimed = await dash.claims.claim(item_id, viewer.user.name)
    if claimed.holder != viewer.user.name:
        raise PageError(409, f"{claimed.holder} is working on this item; it is theirs to decide while they hold it.")
    try:
        await services(request).reviews.decide(item_id, status, decided_by=viewer.user.name, reason_code=reason_code)
    except ReviewAlreadyDecided:
        raise PageError(409, "This item has already been decided; a decision is final.") from None
    except ReviewItemNotFound:
        raise PageError(404, f"No review item {item_id}: it was never queued or its retention is over.") from None
    finally:
        await dash.claims.release(item_id, viewer.user.name)
    following = await dash.browser.next_after(item_id, queue_filter(request, viewer))
    target = item_url(following.id, filter_query(request)) if following else f"{PATH}/?{filter_query(request)}"
    return RedirectResponse(target, status_code=303)


@router.post("/settings")
async def settings(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    form = await checked_form(request, viewer.session)
    await stores(request).users.update(viewer.user.name, blur_images=form.get("blur_images") == "on")
    return RedirectResponse(form.text("back") if form.text("back").startswith(f"{PATH}/") else f"{PATH}/",
                            status_code=303)  # fmt: skip
