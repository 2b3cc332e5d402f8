"""The site adaptation pages: each account's correction of the text score and a profile's threshold backtest on the
account's labels (moderation/site_adaptation.py), with what the admin API's routes for them do
(admin/routes_adaptation.py), in forms. The backtest's chart is drawn here, on the server, as inline SVG: no script,
nothing loaded from elsewhere (the pages' CSP needs nothing more for it: inline SVG is markup, not an image source,
and it is coloured by presentation attributes, never a `style` attribute, which `style-src 'self'` would refuse).

Who may do what follows the other pages' rules:
- Operators manage profiles, so they alone see the backtest (it reads a profile's thresholds) and act: "Apply
  suggested thresholds" writes the profile, which every key pinned to it shares; a refit or a reset changes the
  scores every key of the account is answered with, as a profile change would.
- A moderator sees, for their own accounts only, the correction's status (their decisions are its labels): no
  backtest, no button. Another account's page answers 404, as another account's item does, so that a moderator
  cannot tell which accounts exist; an action posted anyway is refused 403, as on every operator page.
- The changes are not marked with the account in the audit log (ACCOUNT_STATE): a moderator never sees an
  operator's changes there (docs/dashboard.md); the path names the account, the entry's target what changed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from adaptation.backtest import Backtest, OperatingPoint
from dashboard.auth import PATH, Viewer, operator, signed_in
from dashboard.csrf import checked_form
from dashboard.errors import PageError
from dashboard.pages import render
from moderation.site_adaptation import NoSuchProfile, NoSuggestion, SiteAdaptation
from policy.names import NAME_PATTERN
from policy.types import PRIMARY_CATEGORIES, ApiKey, Profile
from serve_app.audit_names import TARGET_STATE
from serve_app.auth import services
from store.keys.listing import list_live_keys, list_profiles

router = APIRouter(prefix=PATH, include_in_schema=False)
TOXIC = PRIMARY_CATEGORIES["text"]
MAX_ACCOUNT_CHARS = 200  # as a key's account (dashboard/routes_config.py)
# What the page says after each action (a fixed text per action: nothing of the query is shown back).
DONE = {
    "refit": "Refitted on all of the account's labels: the status below is the new fit.",
    "reset": "The account's labels and correction are erased: its answers are the served scores again.",
    "applied": "The suggested thresholds are applied: the profile's text thresholds below are its new ones.",
}


def _site(request: Request) -> SiteAdaptation:
    found = services(request)
    if found.labels is None or found.corrections is None:
        raise PageError(404, "This listener keeps no labels.")
    return SiteAdaptation(found.labels, found.corrections, found.config)


def _visible_account(account: str, viewer: Viewer) -> str:
    """The account, if the viewer may see it; for a moderator another account is the same 404 as any unknown one."""
    if not 1 <= len(account) <= MAX_ACCOUNT_CHARS or not viewer.may_see(account):
        raise PageError(404, f"No account {account} among yours.")
    return account


def _profile_name(name: str) -> str:
    if not re.fullmatch(NAME_PATTERN, name):
        raise PageError(400, "A profile's name is letters, digits, '.', '_' or '-' (at most 64).")
    return name


def page_url(account: str, profile: str | None = None, done: str | None = None) -> str:
    query = urlencode({name: value for name, value in (("profile", profile), ("done", done)) if value})
    return f"{PATH}/accounts/{quote(account, safe='')}/adaptation" + (f"?{query}" if query else "")


@router.get("/adaptation")
async def adaptation_index(request: Request, viewer: Viewer = Depends(signed_in)) -> Response:
    """Each account's correction at a glance: an operator's accounts are those with a live key, a moderator's their
    own."""
    site = _site(request)
    if viewer.is_operator:
        accounts = sorted({key.account for key in await list_live_keys(services(request).redis)})
    else:
        accounts = sorted(viewer.user.accounts)
    rows = [(await site.status(account), page_url(account)) for account in accounts]
    return render(request, "adaptation.html", account=None, rows=rows)


@router.get("/accounts/{account}/adaptation")
async def adaptation_page(request: Request, account: str, viewer: Viewer = Depends(signed_in)) -> Response:
    """`?profile=`: the profile to backtest (default: the one most of the account's live keys are pinned to)."""
    account = _visible_account(account, viewer)
    site = _site(request)
    context = {"account": account, "fit": await site.status(account), "actions": page_url(account),
               "notice": DONE.get(request.query_params.get("done", ""), "")}  # fmt: skip
    if viewer.is_operator:
        context.update(await _backtest_view(request, site, account))
    return render(request, "adaptation.html", **context)


async def _backtest_view(request: Request, site: SiteAdaptation, account: str) -> dict:
    redis = services(request).redis
    keys, profiles = await list_live_keys(redis), await list_profiles(redis)
    name = _profile_name(request.query_params.get("profile") or usual_profile(keys, account))
    try:
        found = await site.backtest(account, name)
    except NoSuchProfile:
        raise PageError(404, f"No profile named {name}.") from None
    profile: Profile = await services(request).config.get_profile(name)
    return {
        "profile": profile, "profiles": [p.name for p in profiles], "backtest": found,
        "rows": backtest_rows(found), "chart": recall_chart(found),
        "shared_with": sorted({key.account for key in keys if key.profile == name} - {account}),
        "text_thresholds": [(c, profile.categories[c]) for c in profile.enabled_categories("text")],
    }  # fmt: skip


def usual_profile(keys: list[ApiKey], account: str) -> str:
    """The profile most of the account's live keys are pinned to ("default" when it has none)."""
    pinned = Counter(key.profile for key in keys if key.account == account)
    return pinned.most_common(1)[0][0] if pinned else "default"


@router.post("/accounts/{account}/adaptation/refit")
async def refit(request: Request, account: str, viewer: Viewer = Depends(operator)) -> Response:
    form = await checked_form(request, viewer.session)
    name = _profile_name(form.text("profile")) if form.text("profile") else None
    await _site(request).refit(_visible_account(account, viewer), name)
    return RedirectResponse(page_url(account, name, "refit"), status_code=303)


@router.post("/accounts/{account}/adaptation/reset")
async def reset(request: Request, account: str, viewer: Viewer = Depends(operator)) -> Response:
    """Erases every label of the account and its correction: only with the form's confirmation ticked, since the
    labels (months of decisions, audits and reports) cannot be brought back."""
    form = await checked_form(request, viewer.session)
    name = _profile_name(form.text("profile")) if form.text("profile") else None
    if form.get("confirm") != "yes":
        raise PageError(400, "Nothing erased: tick the confirmation to erase the account's labels and correction.")
    await _site(request).reset(_visible_account(account, viewer))
    return RedirectResponse(page_url(account, name, "reset"), status_code=303)


@router.post("/accounts/{account}/adaptation/apply")
async def apply_thresholds(request: Request, account: str, viewer: Viewer = Depends(operator)) -> Response:
    """Writes the backtest's suggested thresholds into the profile (toxic's, and every enabled text category's in
    step), then shows the page with the profile's new thresholds."""
    form = await checked_form(request, viewer.session)
    name = _profile_name(form.text("profile"))
    setattr(request.state, TARGET_STATE, name)  # what changed is the profile, shared by every key pinned to it
    try:
        await _site(request).apply_suggested_thresholds(_visible_account(account, viewer), name)
    except NoSuchProfile:
        raise PageError(404, f"No profile named {name}.") from None
    except NoSuggestion as exc:
        raise PageError(409, f"Nothing applied: {exc.reason}") from None
    return RedirectResponse(page_url(account, name, "applied"), status_code=303)


@dataclass(frozen=True)
class BacktestRow:
    name: str
    threshold: str
    recall: str
    benign_flagged: str


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _row(name: str, point: OperatingPoint | None, threshold: float | None = None) -> BacktestRow:
    at = point.threshold if point is not None else threshold
    return BacktestRow(name, "—" if at is None else str(round(at, 4)), _share(point.recall if point else None),
                       _share(point.benign_flagged if point else None))


def backtest_rows(found: Backtest) -> list[BacktestRow]:
    """The profile's current review and block thresholds and the suggested ones, each with its estimates."""
    suggested = found.suggested_thresholds or {}
    return [_row("Current review", found.review), _row("Current block", found.block),
            _row("Suggested review", found.suggested_review, suggested.get("review")),
            _row("Suggested block", found.suggested_block, suggested.get("block"))]  # fmt: skip


# The chart's frame, in SVG user units: the plot is the square-ish area inside the margins (axis labels outside).
CHART_WIDTH, CHART_HEIGHT = 520, 340
PLOT_LEFT, PLOT_TOP, PLOT_RIGHT, PLOT_BOTTOM = 56, 14, 500, 290
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Mark:
    kind: str  # "current" or "suggested": its colour and where its label sits
    label: str
    x: float
    y: float
    anchor: str  # the label's text-anchor: "end" on the right half, so it stays inside the frame


@dataclass(frozen=True)
class Chart:
    points: str  # the curve as an SVG polyline's points: "x,y x,y ..."
    marks: list[Mark]
    target_x: float  # the target benign-flagged share, a vertical line
    ticks: list[tuple[str, float, float]]  # (label, x of it on the benign axis, y of it on the recall axis)
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT
    left: int = PLOT_LEFT
    top: int = PLOT_TOP
    right: int = PLOT_RIGHT
    bottom: int = PLOT_BOTTOM


def _x(benign_flagged: float) -> float:
    return round(PLOT_LEFT + benign_flagged * (PLOT_RIGHT - PLOT_LEFT), 1)


def _y(recall: float) -> float:
    return round(PLOT_BOTTOM - recall * (PLOT_BOTTOM - PLOT_TOP), 1)


def _mark(kind: str, point: OperatingPoint | None) -> list[Mark]:
    if point is None or point.recall is None or point.benign_flagged is None:
        return []
    x = _x(point.benign_flagged)
    anchor = "end" if x > (PLOT_LEFT + PLOT_RIGHT) / 2 else "start"
    return [Mark(kind, f"{kind} review {point.threshold:.4g}", x, _y(point.recall), anchor)]


def recall_chart(found: Backtest) -> Chart | None:
    """Recall (y) against the benign-flagged share (x), both 0 to 1, over the backtest's curve of thresholds, with
    the current review threshold and the suggested one marked; None when the curve cannot be drawn (no harmful or
    no fine label: the backtest's reason says which)."""
    drawn = [p for p in found.curve if p.recall is not None and p.benign_flagged is not None]
    if len(drawn) < 2:
        return None
    return Chart(
        points=" ".join(f"{_x(p.benign_flagged)},{_y(p.recall)}" for p in drawn),
        marks=_mark("current", found.review) + _mark("suggested", found.suggested_review),
        target_x=_x(found.target_benign_flagged),
        ticks=[(f"{t:g}", _x(t), _y(t)) for t in TICKS],
    )
