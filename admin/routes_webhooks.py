"""The admin API's webhook routes (`/admin/v1/...`): an account's endpoints, their secrets, their delivery log.

On the admin listener only, behind the admin token (admin/guard.py). A secret is shown once, in the
answer that creates or rotates it. docs/webhooks.md describes the events, the signatures and the retries.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from store.webhooks.outbox import LoggedAttempt
from webhooks.url_guard import MAX_URL_CHARS
from store.webhooks.endpoints import EVENT_TYPES, EventType, WebhookEndpoint
from serve_app.audit_names import TARGET_STATE
from admin.guard import require_admin
from serve_app.auth import services
from serve_app.errors import NotFound, found

router = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)])

ENDPOINT_ID_PATTERN = r"^whk_[0-9a-f]{24}$"
EVENT_ID_PATTERN = r"^msg_[0-9a-f]{24}_[0-9]{1,3}$"
Url = Annotated[str, StringConstraints(min_length=1, max_length=MAX_URL_CHARS)]
Description = Annotated[str, StringConstraints(max_length=200)]
EndpointId = Annotated[str, Path(pattern=ENDPOINT_ID_PATTERN)]


class EndpointRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Url
    events: list[EventType] = Field(default_factory=lambda: list(EVENT_TYPES), min_length=1)
    description: Description = ""


class EndpointChange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Url | None = None
    events: list[EventType] | None = Field(default=None, min_length=1)
    description: Description | None = None
    enabled: bool | None = None


class CreatedEndpoint(WebhookEndpoint):
    secret: str  # shown only now


class EndpointList(BaseModel):
    endpoints: list[WebhookEndpoint]


class RotatedSecret(BaseModel):
    secret: str
    previous_valid_until: float  # until then requests carry a signature with the previous secret too


class DeliveryLog(BaseModel):
    endpoint: str
    attempts: list[LoggedAttempt]


def _no_endpoint(endpoint_id: str):
    return NotFound(f"No webhook endpoint with id {endpoint_id!r}.")


@router.post("/accounts/{account}/webhooks", response_model=CreatedEndpoint, status_code=201)
async def create_endpoint(account: str, body: EndpointRequest, request: Request) -> CreatedEndpoint:
    # UnsafeWebhookUrl and TooManyEndpoints answer 400 invalid_request (serve_app.errors).
    endpoint, secret = await services(request).webhooks.create(account, body.url, body.events, body.description)
    setattr(request.state, TARGET_STATE, endpoint.id)  # the audit log names the new endpoint; its secret is only here
    return CreatedEndpoint(**endpoint.model_dump(), secret=secret)


@router.get("/accounts/{account}/webhooks", response_model=EndpointList)
async def list_endpoints(account: str, request: Request) -> EndpointList:
    return EndpointList(endpoints=await services(request).webhooks.list(account))


@router.get("/webhooks/{endpoint_id}", response_model=WebhookEndpoint)
async def get_endpoint(endpoint_id: EndpointId, request: Request) -> WebhookEndpoint:
    return found(await services(request).webhooks.get(endpoint_id), _no_endpoint(endpoint_id))


@router.patch("/webhooks/{endpoint_id}", response_model=WebhookEndpoint)
async def change_endpoint(endpoint_id: EndpointId, body: EndpointChange, request: Request) -> WebhookEndpoint:
    changed = await services(request).webhooks.update(endpoint_id, **body.model_dump())
    return found(changed, _no_endpoint(endpoint_id))


@router.delete("/webhooks/{endpoint_id}", status_code=204)
async def delete_endpoint(endpoint_id: EndpointId, request: Request) -> Response:
    if not await services(request).webhooks.delete(endpoint_id):
        raise _no_endpoint(endpoint_id)
    return Response(status_code=204)


@router.post("/webhooks/{endpoint_id}/rotate-secret", response_model=RotatedSecret)
async def rotate_secret(endpoint_id: EndpointId, request: Request) -> RotatedSecret:
    rotated = found(await services(request).webhooks.rotate_secret(endpoint_id), _no_endpoint(endpoint_id))
    return RotatedSecret(secret=rotated[0], previous_valid_until=rotated[1])


@router.get("/webhooks/{endpoint_id}/deliveries", response_model=DeliveryLog)
async def delivery_log(
    endpoint_id: EndpointId, request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> DeliveryLog:
    """The endpoint's attempts, newest first: event, attempt number, outcome, HTTP status, latency, next try."""
    found(await services(request).webhooks.get(endpoint_id), _no_endpoint(endpoint_id))
    return DeliveryLog(endpoint=endpoint_id, attempts=await services(request).outbox.log(endpoint_id, limit))


@router.post("/webhooks/{endpoint_id}/deliveries/{event_id}/redeliver", status_code=202)
async def redeliver(
    endpoint_id: EndpointId, event_id: Annotated[str, Path(pattern=EVENT_ID_PATTERN)], request: Request
) -> dict:
    """Sends the event again, from the start of the retry schedule (kept 7 days after its last try)."""
    if not await services(request).outbox.redeliver(endpoint_id, event_id):
        raise NotFound(f"No delivery of event {event_id!r} to endpoint {endpoint_id!r} is kept.")
    return {"endpoint": endpoint_id, "event_id": event_id, "status": "pending"}
