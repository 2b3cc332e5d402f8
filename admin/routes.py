"""The admin API (`/admin/v1/`): what the dashboard and the CLI call.

Served only by the admin app on its own listener (`admin.app.create_admin_app`),
guarded by `Authorization: Bearer $MODERATION_ADMIN_TOKEN`. Plans and profiles written
here take effect on the next request of every replica, because every request reads them
from Redis.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, StringConstraints

from store.people.audit_log import AuditPage
from store.score_suggestions import Suggestion
from store.keys.quota import month_of
from policy.names import NAME_PATTERN, STREAM_ID_PATTERN
from policy.types import ApiKey, Plan, Profile, ReviewItem, ReviewStatus
from serve_app.audit_names import ACCOUNT_STATE, TARGET_STATE
from admin.guard import require_admin
from serve_app.auth import services
from serve_app.errors import InvalidRequest, NoSuchReviewItem, NotFound, found
from serve_app.schemas import review_id

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account: Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
    profile: Name
    plan: Name


class CreatedKey(BaseModel):
    id: str
    key: str
    account: str
    profile: str
    plan: str


class ReviewDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["approved", "rejected"]


class ReviewList(BaseModel):
    items: list[ReviewItem]


class Feedback(BaseModel):
    account: str
    items: list[Suggestion]


class Usage(BaseModel):
    account: str
    month: str
    used: int


@router.put("/plans/{name}", response_model=Plan)
async def put_plan(name: Annotated[str, Path(pattern=NAME_PATTERN)], plan: Plan, request: Request) -> Plan:
    plan = plan.model_copy(update={"name": name})
    await services(request).config.put_plan(plan)
    return plan


@router.put("/profiles/{name}", response_model=Profile)
async def put_profile(name: Annotated[str, Path(pattern=NAME_PATTERN)], profile: Profile, request: Request) -> Profile:
    profile = profile.model_copy(update={"name": name})
    await services(request).config.put_profile(profile)
    return profile


@router.get("/plans/{name}", response_model=Plan)
async def get_plan(name: str, request: Request) -> Plan:
    return found(await services(request).config.get_plan(name), NotFound(f"No plan named {name!r}."))


@router.get("/profiles/{name}", response_model=Profile)
async def get_profile(name: str, request: Request) -> Profile:
    return found(await services(request).config.get_profile(name), NotFound(f"No profile named {name!r}."))


@router.post("/keys", response_model=CreatedKey, status_code=201)
async def create_key(body: KeyRequest, request: Request) -> CreatedKey:
    config = services(request).config
    if await config.get_plan(body.plan) is None:
        raise InvalidRequest(f"No plan named {body.plan!r}.")
    if await config.get_profile(body.profile) is None:
        raise InvalidRequest(f"No profile named {body.profile!r}.")
    record, secret = await config.create_key(body.account, body.profile, body.plan)
    setattr(request.state, TARGET_STATE, record.id)  # the audit log names the key by id; its secret is only here
    return CreatedKey(id=record.id, key=secret, account=record.account, profile=record.profile, plan=record.plan)


@router.get("/keys/{key_id}", response_model=ApiKey)
async def get_key(key_id: str, request: Request) -> ApiKey:
    return found(await services(request).config.get_key(key_id), NotFound(f"No key with id {key_id!r}."))


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: str, request: Request) -> Response:
    if not await services(request).config.revoke_key(key_id):
        raise NotFound(f"No key with id {key_id!r}.")
    await services(request).widget.set_origins(key_id, [])  # its pages' preflights are no longer answered
    return Response(status_code=204)


@router.get("/accounts/{account}/usage", response_model=Usage)
async def account_usage(account: str, request: Request) -> Usage:
    """Quota units the account has used this calendar month (UTC)."""
    now = time.time()  # one clock for both, or the two could straddle a month boundary
    used = await services(request).quota.quota_used(account, now)
    return Usage(account=account, month=month_of(now)[0], used=used)


@router.get("/accounts/{account}/feedback", response_model=Feedback)
async def account_feedback(account: str, request: Request, limit: int = 100) -> Feedback:
    """Score suggestions the account sent to comments:suggestscore, newest first (no comment text)."""
    items = await services(request).feedback.list(account, limit=min(max(limit, 1), 1000))
    return Feedback(account=account, items=items)


@router.get("/reviews", response_model=ReviewList)
async def list_reviews(
    request: Request, status: ReviewStatus | None = None, account: str | None = None, limit: int = 100
) -> ReviewList:
    items = await services(request).reviews.list(status=status, account=account, limit=min(max(limit, 1), 1000))
    return ReviewList(items=items)


@router.get("/reviews/{item_id}", response_model=ReviewItem)
async def get_review(item_id: str, request: Request) -> ReviewItem:
    return found(await services(request).reviews.get(review_id(item_id)), NoSuchReviewItem())


@router.post("/reviews/{item_id}/decision", response_model=ReviewItem)
async def decide_review(item_id: str, body: ReviewDecision, request: Request) -> ReviewItem:
    # ReviewItemNotFound and ReviewAlreadyDecided answer 404 and 409 (serve_app.errors).
    item = await services(request).reviews.decide(review_id(item_id), body.status, decided_by="admin-token")
    setattr(request.state, ACCOUNT_STATE, item.account)  # its audit entry shows to that account's moderators
    return item


@router.get("/audit", response_model=AuditPage)
async def audit_log(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    before: Annotated[str | None, Query(pattern=STREAM_ID_PATTERN)] = None,
) -> AuditPage:
    """The admin audit log, newest first: `before` (the last page's `next_before`) pages to older entries."""
    audit = services(request).audit
    if audit is None:  # Services built without a store connection of their own (tests)
        raise NotFound("This admin API keeps no audit log.")
    return await audit.page(limit=limit, before=before)
