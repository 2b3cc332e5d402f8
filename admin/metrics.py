"""The review queue's numbers in Prometheus' text format, at GET /metrics of the admin listener.

Ray exports the service's other metrics on each node's metrics port (deployments/metrics.py); the queue's numbers
are the store's, not any replica's, so the admin listener (one per install) answers them, fresh at each scrape.
Guarded by the admin token, as a machine's call: Prometheus sends it with `authorization: {credentials: ...}`.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from admin.guard import require_admin
from serve_app.auth import services
from store.review.stats import QueueStats

router = APIRouter(include_in_schema=False)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@router.get("/metrics", dependencies=[Depends(require_admin)])
async def queue_metrics(request: Request) -> Response:
    health = await QueueStats(services(request).redis).health()
    lines = [
        "# HELP moderation_review_pending Pending review items per account.",
        "# TYPE moderation_review_pending gauge",
        *(f'moderation_review_pending{{account="{_label(a)}"}} {n}' for a, n in health.pending_by_account.items()),
        "# HELP moderation_review_oldest_pending_age_seconds Age of the oldest pending review item (0 when none).",
        "# TYPE moderation_review_oldest_pending_age_seconds gauge",
        f"moderation_review_oldest_pending_age_seconds {health.oldest_pending_age_s:.3f}",
        "# HELP moderation_review_decisions_last_hour Review decisions made in the last hour.",
        "# TYPE moderation_review_decisions_last_hour gauge",
        f"moderation_review_decisions_last_hour {health.decisions_last_hour}",
    ]
    return Response("\n".join(lines) + "\n", media_type=CONTENT_TYPE)
