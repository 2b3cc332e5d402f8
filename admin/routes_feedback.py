"""The admin API's score suggestions (`/admin/v1/accounts/{account}/feedback`): what an account sent to Perspective's
`comments:suggestscore` (store/score_suggestions.py), newest first, never the comment's text."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from admin.guard import require_admin
from serve_app.auth import services
from store.score_suggestions import Suggestion

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


class Feedback(BaseModel):
    account: str
    items: list[Suggestion]


@router.get("/accounts/{account}/feedback", response_model=Feedback)
async def account_feedback(account: str, request: Request, limit: int = 100) -> Feedback:
    """Score suggestions the account sent to comments:suggestscore, newest first (no comment text)."""
    items = await services(request).feedback.list(account, limit=min(max(limit, 1), 1000))
    return Feedback(account=account, items=items)
