"""The admin API's review queue (`/admin/v1/reviews`): list items by status and account, read one, decide one (as
`admin-token`; store/review/queue.py). The dashboard's moderators work the same queue (dashboard/routes_queue.py)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict

from admin.guard import require_admin
from policy.types import ReviewItem, ReviewStatus
from serve_app.audit_names import ACCOUNT_STATE
from serve_app.auth import services
from serve_app.errors import NoSuchReviewItem, found
from serve_app.schemas import review_id

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


class ReviewDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["approved", "rejected"]


class ReviewList(BaseModel):
    items: list[ReviewItem]


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
