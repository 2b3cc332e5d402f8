"""The browser widget's API (docs/widget.md): the site's backend mints a token and redeems verdicts with its server
key; the page checks a text or a photo with the token, and gets back the decision and a signed verdict.

The checks run the same moderation flow as /v1/moderate-text and /v1/moderate (quota, rate, models, review queue);
what is the widget's own: the token's admission (origin, use budget, per-address rate), the verdict, and CORS.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, ValidationError

from moderation.flow import Caller
from moderation.items import image_item, text_item
from moderation.limits import check_texts, require_scope
from policy import widget_verdicts
from policy.types import Action, ContentKind
from serve_app import errors
from serve_app.auth import authenticated_caller, bearer_token, services
from serve_app.bodies import json_bytes_for, json_object, read_body, read_image_form, read_json
from serve_app.services import count_rate_refusal
from serve_app.schemas import BODY_ROUTE_ERRORS, OK_HEADERS, error_responses
from serve_app.widget_cors import ALLOWED_ORIGIN_STATE, preflight_headers
from serve_app.widget_schemas import (
    CHECK_IMAGE_BODY,
    CHECK_TEXT_BODY,
    REDEEM_BODY,
    SMALL_BODY_BYTES,
    TOKEN_BODY,
    RedeemedVerdict,
    RedeemRequest,
    TokenRequest,
    WidgetCheck,
    WidgetToken,
)
from store.widget.tokens import WidgetAdmitted, WidgetStore

router = APIRouter()
WIDGET_JS = Path(__file__).parent / "static" / "widget.js"


@dataclass(frozen=True)
class Checking:
    """A widget check let in: the token's key with its plan and profile, the page's origin, the token's uses left."""

    caller: Caller
    origin: str
    uses_left: int


def widget_store(request: Request) -> WidgetStore:
    return services(request).widget


@router.get("/v1/widget.js", include_in_schema=False)
async def widget_script() -> FileResponse:
    return FileResponse(WIDGET_JS, media_type="text/javascript", headers={"Cache-Control": "public, max-age=300"})


@router.post("/v1/widget/tokens", response_model=WidgetToken, openapi_extra=TOKEN_BODY,
             responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 403)})
async def mint_token(request: Request, caller: Caller = Depends(authenticated_caller)) -> WidgetToken:
    """With the server key, from the site's backend: a check-only token for one page view."""
    body = await _small_body(request)
    wanted = _validated(TokenRequest, json_object(body, '{"minutes": 30, "uses": 20}') if body.strip() else {})
    store = widget_store(request)
    origins = await store.origins(caller.key.id)
    if not origins:
        raise errors.WidgetNotEnabled()
    minted = await store.mint(caller.key.id, minutes=wanted.minutes, uses=wanted.uses)
    return WidgetToken(token=minted.secret, expires_at=minted.expires_at, uses=minted.uses, origins=origins)


@router.options("/v1/widget/check-text", include_in_schema=False)
@router.options("/v1/widget/check-image", include_in_schema=False)
async def preflight(request: Request) -> Response:
    origin = request.headers.get("origin", "")
    if not origin or not await widget_store(request).some_key_allows(origin):
        raise errors.OriginNotAllowed()
    return Response(status_code=204, headers=preflight_headers(origin))


@router.post("/v1/widget/check-text", response_model=WidgetCheck, openapi_extra=CHECK_TEXT_BODY,
             responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413)})
async def check_text(request: Request) -> WidgetCheck:
    checking = await _widget_caller(request)
    caller = checking.caller
    raw = await read_json(request, caller, "text", json_bytes_for(caller.plan.text_max_chars), '{"text": "..."}')
    text = raw.get("text")
    if not isinstance(text, str) or set(raw) - {"text"}:
        raise errors.InvalidRequest('The body is {"text": "..."}, the text a string.')
    check_texts([text], caller.plan)
    request.state.log_fields.update(text_chars=len(text))
    [outcome] = await services(request).flow.moderate_many(caller, [text_item(caller.profile, text)])
    text_sha256 = widget_verdicts.text_sha256(text)
    return await _answer(request, checking, outcome.decision.decision, "text", text_sha256)


@router.post("/v1/widget/check-image", response_model=WidgetCheck, openapi_extra=CHECK_IMAGE_BODY,
             responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413)})
async def check_image(request: Request) -> WidgetCheck:
    checking = await _widget_caller(request)
    caller = checking.caller
    require_scope(caller.plan, "image")
    data, _ = await read_image_form(request, caller.plan)
    [outcome] = await services(request).flow.moderate_many(caller, [image_item(caller.plan, caller.profile, data)])
    image_sha256 = widget_verdicts.bytes_sha256(data)
    return await _answer(request, checking, outcome.decision.decision, "image", image_sha256)


@router.post("/v1/widget/verdicts/redeem", response_model=RedeemedVerdict, openapi_extra=REDEEM_BODY,
             responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 403, 409, 410)})
async def redeem_verdict(request: Request, caller: Caller = Depends(authenticated_caller)) -> RedeemedVerdict:
    """With the server key, from the site's backend, once per post: the verdict the page sent, the kind of content
    the backend received (text or image) and its SHA-256. 200 only for a genuine, unexpired, unused verdict of this
    key about exactly that content, checked as that kind."""
    example = '{"verdict": "v1...", "kind": "text", "content_sha256": "<64 hex digits>"}'
    wanted = _validated(RedeemRequest, json_object(await _small_body(request), example))
    store = widget_store(request)
    verdict = widget_verdicts.check(
        wanted.verdict, await store.signing_secret(), key_id=caller.key.id, kind=wanted.kind,
        content_sha256=wanted.content_sha256, now=time.time(),
    )  # fmt: skip
    if not await store.redeem(verdict.nonce, verdict.expires_at):
        raise widget_verdicts.VerdictUsed("The verdict was redeemed before; a verdict vouches for one post.")
    return RedeemedVerdict(decision=verdict.decision, kind=verdict.kind, issued_at=verdict.issued_at,
                           origin=verdict.origin)  # fmt: skip


async def _widget_caller(request: Request) -> Checking:
    """The token's key, plan and profile, once the token is live, the page's origin one its key allows, a use of
    its budget left and the address and key within their rates; else the error that says which."""
    token, origin = bearer_token(request), request.headers.get("origin", "")
    if token is None:
        raise errors.Unauthorized("A widget token is required: Authorization: Bearer <widget token>.")
    address = _client_address(request)
    found = await widget_store(request).admit_check(token, origin=origin, address=address)
    if isinstance(found, WidgetAdmitted) or found.origin_allowed:
        # The key allows this origin: from here on the page may read the answer, errors included
        # (serve_app/widget_cors.py), so the widget can tell a refusal from an outage.
        setattr(request.state, ALLOWED_ORIGIN_STATE, origin)
    if not isinstance(found, WidgetAdmitted):
        _refuse(found.reason, found.retry_after_s, origin)
    request.state.account = found.key.account
    if found.retry_after_s > 0:
        await count_rate_refusal(services(request), found.key.account)
        raise errors.RateLimited(retry_after_s=found.retry_after_s)
    return Checking(Caller(key=found.key, plan=found.plan, profile=found.profile), origin, found.uses_left)


def _client_address(request: Request) -> str:
    # HAProxy's address header only beside its secret, and an IPv6 client by its /64 (serve_app/client_address.py).
    return services(request).client_addresses.limit_key(request)


def _refuse(reason: str, retry_after_s: float, origin: str) -> None:
    """A token's check refused, with the error that says why (an unknown token first, whatever the origin)."""
    if reason == "origin" and not origin:
        raise errors.OriginNotAllowed("A widget check comes from a page: the Origin header is required.")
    if reason == "origin":
        raise errors.OriginNotAllowed()
    if reason == "spent":
        raise errors.WidgetTokenSpent()
    if reason == "address":
        raise errors.RateLimited("Too many widget checks from this address.", retry_after_s=retry_after_s)
    if reason == "unconfigured":
        raise errors.StoreUnavailable("The key's plan or profile is not configured.")
    raise errors.Unauthorized("The widget token is unknown or expired, or its key was revoked.")


async def _answer(request: Request, checking: Checking, decision: Action, kind: ContentKind,
                  content_sha256: str) -> WidgetCheck:  # fmt: skip
    caller, now = checking.caller, time.time()
    verdict = widget_verdicts.Verdict(
        key_id=caller.key.id, decision=decision, kind=kind, content_sha256=content_sha256, issued_at=now,
        expires_at=now + widget_verdicts.VERDICT_LIFETIME_S, nonce=secrets.token_urlsafe(16), origin=checking.origin,
    )  # fmt: skip
    request.state.log_fields.update(decision=decision)
    return WidgetCheck(
        decision=decision,
        may_post=widget_verdicts.may_post(decision, caller.profile),
        verdict=widget_verdicts.sign(verdict, await widget_store(request).signing_secret()),
        verdict_expires_at=verdict.expires_at,
        uses_left=checking.uses_left,
    )


async def _small_body(request: Request) -> bytes:
    return await read_body(request, SMALL_BODY_BYTES, errors.InvalidRequest(
        f"A token request or a redemption is a few fields, at most {SMALL_BODY_BYTES} bytes."))


def _validated(model: type[BaseModel], raw: dict) -> BaseModel:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise errors.InvalidRequest(f"{where}: {first['msg']}".strip(": ")) from None
