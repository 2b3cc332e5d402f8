"""The admin API's audit log (`/admin/v1/audit`): its entries newest first, page by page (store/people/audit_log.py;
admin/audit_middleware.py writes them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from admin.guard import require_admin
from policy.names import STREAM_ID_PATTERN
from serve_app.auth import services
from serve_app.errors import NotFound
from store.people.audit_log import AuditPage

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])


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
