"""The operators' pages for keys, profiles and plans: everything the admin API's config routes do, in forms.

Profiles and plans are validated by the same models the admin API validates with (policy/types.py Profile and
Plan); a form that does not pass is answered 400 with the model's reason, and nothing is written. A created key's
secret is shown once, on the page that answers the form (not cacheable), and never again.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Path, Request
from pydantic import ValidationError
from starlette.responses import RedirectResponse, Response

from dashboard.auth import PATH, Viewer, operator
from dashboard.errors import PageError
from dashboard.csrf import checked_form
from dashboard.forms import Form
from dashboard.pages import render
from store.keys.listing import list_live_keys, list_plans, list_profiles
from policy.types import BETA_CATEGORIES, IMAGE_CATEGORIES, PRIMARY_CATEGORIES, TEXT_CATEGORIES, Plan, Profile
from serve_app.audit_names import TARGET_STATE
from serve_app.auth import services
from policy.names import NAME_PATTERN

router = APIRouter(prefix=PATH, include_in_schema=False)
PLAN_NUMBERS = {"monthly_quota": int, "rate_per_second": float, "burst": int, "image_max_bytes": int,
                "image_max_pixels": int, "text_max_chars": int, "max_in_flight": int}  # fmt: skip
CATEGORIES = (*IMAGE_CATEGORIES, *TEXT_CATEGORIES)


def _invalid(error: ValidationError) -> PageError:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return PageError(400, f"Not saved: {where + ': ' if where else ''}{first.get('msg', 'invalid')}.")


def _number(form: Form, name: str, kind: type) -> int | float:
    try:
        return kind(form.text(name))
    except ValueError:
        raise PageError(400, f"Not saved: {name} must be a number.") from None


@router.get("/keys")
async def keys_page(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    redis = services(request).redis
    return render(request, "keys.html", keys=await list_live_keys(redis), plans=await list_plans(redis),
                  profiles=await list_profiles(redis), created=None)  # fmt: skip


@router.post("/keys")
async def create_key(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    form = await checked_form(request, viewer.session)
    account, profile, plan = form.text("account"), form.text("profile"), form.text("plan")
    config = services(request).config
    if not 1 <= len(account) <= 200:
        raise PageError(400, "Not created: the account is 1 to 200 characters.")
    if await config.get_plan(plan) is None or await config.get_profile(profile) is None:
        raise PageError(400, "Not created: choose an existing plan and profile.")
    record, secret = await config.create_key(account, profile, plan)
    setattr(request.state, TARGET_STATE, record.id)  # the audit log names the key by id, never its secret
    redis = services(request).redis
    response = render(request, "keys.html", keys=await list_live_keys(redis), plans=await list_plans(redis),
                      profiles=await list_profiles(redis), created={"record": record, "secret": secret})  # fmt: skip
    response.headers["Cache-Control"] = "no-store"
    return response


@router.post("/keys/{key_id}/revoke")
async def revoke_key(request: Request, key_id: str, viewer: Viewer = Depends(operator)) -> Response:
    await checked_form(request, viewer.session)
    if not await services(request).config.revoke_key(key_id):
        raise PageError(404, f"No key with id {key_id}.")
    await services(request).widget.set_origins(key_id, [])  # its pages' preflights are no longer answered
    return RedirectResponse(f"{PATH}/keys", status_code=303)


@router.get("/profiles")
async def profiles_page(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    return render(request, "profiles.html", profiles=await list_profiles(services(request).redis))


@router.post("/profiles")
async def copy_profile(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    """A new profile, as a copy of an existing one under a new name; then its page, to edit it."""
    form = await checked_form(request, viewer.session)
    name, config = form.text("name"), services(request).config
    if not re.fullmatch(NAME_PATTERN, name):
        raise PageError(400, "Not created: a profile's name is letters, digits, '.', '_' or '-' (at most 64).")
    setattr(request.state, TARGET_STATE, name)
    if await config.get_profile(name) is not None:
        raise PageError(409, f"Not created: a profile named {name} exists already.")
    base = await config.get_profile(form.text("base"))
    if base is None:
        raise PageError(400, "Not created: choose an existing profile to start from.")
    await config.put_profile(base.model_copy(update={"name": name}))
    return RedirectResponse(f"{PATH}/profiles/{name}", status_code=303)


@router.get("/profiles/{name}")
async def profile_page(request: Request, name: str = Path(pattern=NAME_PATTERN), viewer: Viewer = Depends(operator)):
    profile = await services(request).config.get_profile(name)
    if profile is None:
        raise PageError(404, f"No profile named {name}.")
    return render(request, "profile.html", profile=profile, categories=CATEGORIES, beta=BETA_CATEGORIES,
                  primary=set(PRIMARY_CATEGORIES.values()))  # fmt: skip


def profile_of(name: str, form: Form, current: Profile) -> Profile:
    """The profile the form describes; categories the form leaves out keep their current values."""
    categories = {name: limits.model_dump() for name, limits in current.categories.items()}
    for category in CATEGORIES:
        if f"{category}.review" not in form:
            continue
        categories[category] = {"enabled": form.get(f"{category}.enabled") == "on",
                                "review": _number(form, f"{category}.review", float),
                                "block": _number(form, f"{category}.block", float)}  # fmt: skip
    try:
        return Profile(name=name, mode=form.text("mode"), report_threshold=_number(form, "report_threshold", int),
                       keep_review_text=form.get("keep_review_text") == "on", categories=categories,
                       widget_post_anyway=_widget_post_anyway(form, current),
                       answer_image_text=_answer_image_text(form, current),
                       **_adaptation_fields(form, current))  # fmt: skip
    except ValidationError as error:
        raise _invalid(error) from None


def _adaptation_fields(form: Form, current: Profile) -> dict[str, float]:
    """The audit rate and the backtest's target (docs/dashboard.md, Site adaptation); a form without them keeps
    the current ones, so that a form of before these fields never resets them."""
    return {field: _number(form, field, float) if field in form else getattr(current, field)
            for field in ("audit_rate", "target_benign_flagged")}  # fmt: skip


def _answer_image_text(form: Form, current: Profile) -> bool:
    """Whether an image's answer says the text read on it; a form without the checkbox's marker keeps it."""
    if "answer_image_text.shown" not in form:
        return current.answer_image_text
    return form.get("answer_image_text") == "on"


def _widget_post_anyway(form: Form, current: Profile) -> list[str]:
    """The warnings after which the widget offers "post anyway"; a form without the widget's fieldset keeps them."""
    if "widget_post_anyway.shown" not in form:
        return current.widget_post_anyway
    return [warning for warning in ("review", "block") if form.get(f"widget_post_anyway.{warning}") == "on"]


@router.post("/profiles/{name}")
async def save_profile(request: Request, name: str = Path(pattern=NAME_PATTERN), viewer: Viewer = Depends(operator)):
    form = await checked_form(request, viewer.session)
    config = services(request).config
    current = await config.get_profile(name)
    if current is None:
        raise PageError(404, f"No profile named {name}.")
    await config.put_profile(profile_of(name, form, current))
    return RedirectResponse(f"{PATH}/profiles/{name}?saved=1", status_code=303)


@router.get("/plans")
async def plans_page(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    return render(request, "plans.html", plans=await list_plans(services(request).redis), numbers=PLAN_NUMBERS)


@router.post("/plans")
async def save_plan(request: Request, viewer: Viewer = Depends(operator)) -> Response:
    """Creates the plan or replaces it whole (as PUT /admin/v1/plans/{name})."""
    form = await checked_form(request, viewer.session)
    name = form.text("name")
    if not re.fullmatch(NAME_PATTERN, name):
        raise PageError(400, "Not saved: a plan's name is letters, digits, '.', '_' or '-' (at most 64).")
    setattr(request.state, TARGET_STATE, name)
    fields = {field: _number(form, field, kind) for field, kind in PLAN_NUMBERS.items()}
    try:
        plan = Plan(name=name, scope=form.text("scope"), **fields)
    except ValidationError as error:
        raise _invalid(error) from None
    await services(request).config.put_plan(plan)
    return RedirectResponse(f"{PATH}/plans?saved={name}", status_code=303)
