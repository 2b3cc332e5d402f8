"""The admin API's usage (`/admin/v1/accounts/{account}/usage`): the quota units an account has used this calendar
month (UTC), as counted by store/keys/quota.py."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from admin.guard import require_admin
from serve_app.auth import services
from store.keys.quota import month_of

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


class Usage(BaseModel):
    account: str
    month: str
    used: int


@router.get("/accounts/{account}/usage", response_model=Usage)
async def account_usage(account: str, request: Request) -> Usage:
    """Quota units the account has used this calendar month (UTC)."""
    now = time.time()  # one clock for both, or the two could straddle a month boundary
    used = await services(request).quota.quota_used(account, now)
    return Usage(account=account, month=month_of(now)[0], used=used)
