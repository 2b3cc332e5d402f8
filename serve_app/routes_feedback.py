"""`POST /v1/feedback`: a site's backend says what a text really was, e.g. one it removed that the service allowed.

The text is scored as the key's profile serves it (no quota unit; rate-limited like every call of the key; the
model's per-account admission as any text), and kept as a `report` label of the account (adaptation/labels.py):
its embedding, served score, label and language, never the text nor the reference. The account's next refit learns
from it (moderation/site_adaptation.py); no other account ever reads it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from moderation.flow import Caller
from moderation.limits import check_texts
from policy.types import MAX_FIELD_CHARS
from serve_app import errors
from serve_app.auth import authenticated_caller, services
from serve_app.bodies import json_bytes_for, read_json
from serve_app.schemas import OK_HEADERS, error_responses

router = APIRouter()


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, StringConstraints(min_length=1)]
    label: Literal["harmful", "fine"]
    reference: Annotated[str | None, Field(max_length=MAX_FIELD_CHARS)] = None


class FeedbackResult(BaseModel):
    label: Literal["harmful", "fine"]
    reference: str | None = None
    kept: bool = Field(description="Whether a label was kept (false when the served text model gives no embedding).")


FEEDBACK_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["text", "label"], "additionalProperties": False,
    "properties": {"text": {"type": "string", "minLength": 1, "description": "At most the plan's characters."},
                   "label": {"type": "string", "enum": ["harmful", "fine"]},
                   "reference": {"anyOf": [{"type": "string", "maxLength": MAX_FIELD_CHARS}, {"type": "null"}]}}}}}}}


@router.post(
    "/v1/feedback", response_model=FeedbackResult, response_model_exclude_none=True, openapi_extra=FEEDBACK_BODY,
    responses={**OK_HEADERS, **error_responses(400, 401, 403, 413, 429, 503)},
)
async def feedback(request: Request, caller: Caller = Depends(authenticated_caller)) -> FeedbackResult:
    raw = await read_json(request, caller, "text", json_bytes_for(caller.plan.text_max_chars),
                          '{"text": "...", "label": "harmful" | "fine", "reference": "..."}')
    try:
        body = FeedbackRequest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise errors.InvalidRequest(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    if not body.text.strip():
        raise errors.InvalidRequest("text: must not be blank.")
    check_texts([body.text], caller.plan)
    kept = await services(request).flow.keep_reported_label(caller, body.text, body.label == "harmful")
    request.state.log_fields.update(text_chars=len(body.text), label=body.label, kept=kept)
    return FeedbackResult(label=body.label, reference=body.reference, kept=kept)
