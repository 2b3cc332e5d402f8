"""OpenAI-compatible `POST /v1/moderations`: the `openai` SDK, LiteLLM and LibreChat call it unchanged.

Each input (a string, each string of an array, or an array of text and image parts as one input) goes
through the same flow as the native API: the key's plan and profile, one quota unit per text or image
moderated, one rate token per request. Categories are mapped by `moderation.compat_mapping`; errors
answer in OpenAI's shape (`serve_app.errors.ENVELOPES`).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from moderation.compat_mapping import DEFAULT_OPENAI_MODEL, OPENAI_MODELS, Part, openai_result
from moderation.flow import Caller, Moderated
from moderation.items import image_item, text_item
from moderation.limits import BATCH_TEXT_LIMITS, check_texts, require_scope
from policy.types import Plan, Profile
from serve_app.auth import admitted_caller, services
from serve_app.bodies import image_too_large, json_bytes_for, read_json
from serve_app.errors import InvalidRequest, ModelNotFound
from serve_app.schemas import BODY_ROUTE_ERRORS, OK_HEADERS, OpenAIErrorBody, error_responses

router = APIRouter()
MAX_IMAGES = 1  # per request
DATA_URL = re.compile(r"data:image/[A-Za-z0-9.+-]+(?:;[^,;]*)*;base64,(.*)", re.DOTALL | re.IGNORECASE)
NO_FETCH = "image_url.url must be a data: URL (data:image/...;base64,...): this service never fetches URLs."

_PART = {"oneOf": [
    {"type": "object", "properties": {"type": {"enum": ["text"]}, "text": {"type": "string"}},
     "required": ["type", "text"], "additionalProperties": False},
    {"type": "object", "properties": {"type": {"enum": ["image_url"]}, "image_url": {
        "type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
     "required": ["type", "image_url"], "additionalProperties": False},
]}  # fmt: skip
MODERATIONS_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["input"],
    "properties": {
        "input": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1},
                            {"type": "array", "items": _PART, "minItems": 1}]},  # fmt: skip
        "model": {"type": "string", "enum": list(OPENAI_MODELS)},
    },
}}}}}  # fmt: skip


class OpenAIModerationResult(BaseModel):
    flagged: bool
    categories: dict[str, bool]
    category_scores: dict[str, float]
    category_applied_input_types: dict[str, list[Literal["text", "image"]]]


class OpenAIModeration(BaseModel):
    id: str
    model: str
    results: list[OpenAIModerationResult]


@router.post(
    "/v1/moderations", response_model=OpenAIModeration, openapi_extra=MODERATIONS_BODY,
    responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413, body=OpenAIErrorBody)},
)
async def moderations(
    request: Request, caller: Caller = Depends(admitted_caller(), scope="function")
) -> OpenAIModeration:
    plan = caller.plan
    raw = await read_json(request, caller, None, body_limit(plan), '{"input": "..."}')
    model = raw.get("model", DEFAULT_OPENAI_MODEL)
    if model not in OPENAI_MODELS:
        raise ModelNotFound(f"The model {str(model)[:100]!r} does not exist; use one of {', '.join(OPENAI_MODELS)}.")
    inputs = _inputs(raw.get("input"))
    texts = [value for parts in inputs for kind, value in parts if kind == "text"]
    images = [value for parts in inputs for kind, value in parts if kind == "image"]
    _check_kinds(texts, images, plan, model)
    decoded = iter([_image_bytes(url, plan.image_max_bytes) for url in images])
    items = [
        text_item(caller.profile, value) if kind == "text" else image_item(plan, caller.profile, next(decoded))
        for parts in inputs for kind, value in parts
    ]  # fmt: skip
    request.state.log_fields.update(items=len(items), text_chars=sum(map(len, texts)), images=len(images))

    outcomes = iter(await services(request).flow.moderate_many(caller, items))
    results = [_result([(kind, next(outcomes)) for kind, _ in parts], caller.profile) for parts in inputs]
    request.state.log_fields.update(flagged=[r.flagged for r in results])
    return OpenAIModeration(id=f"modr-{uuid.uuid4().hex}", model=model, results=results)


def body_limit(plan: Plan) -> int:
    """The largest body the plan's scope can use: room for a full batch of texts only when it covers texts, and
    for an image's base64 only when it covers images (a text-only plan's body is 1.3 MB at most, not 14)."""
    text_chars = plan.text_max_chars * BATCH_TEXT_LIMITS if plan.covers("text") else 0
    image_chars = _base64_chars(plan.image_max_bytes) if plan.covers("image") else 0
    return json_bytes_for(text_chars) + image_chars


def _check_kinds(texts: list[str], images: list[str], plan: Plan, model: str) -> None:
    """The plan covers each kind of content sent, within its limits; the model takes images when any is sent."""
    if texts:
        require_scope(plan, "text")
        check_texts(texts, plan)
    if images:
        require_scope(plan, "image")
        if model.startswith("text-moderation"):
            raise InvalidRequest(f"The model {model} takes text only; use omni-moderation-latest for images.")
        if len(images) > MAX_IMAGES:
            raise InvalidRequest(f"At most {MAX_IMAGES} image per request.")


def _result(parts: list[tuple[str, Moderated]], profile: Profile) -> OpenAIModerationResult:
    """One input's entry of `results`, from the outcome of each of its parts."""
    scored = [Part(kind=kind, scores=o.scored.categories, decision=o.decision.decision,
                   read_scores=getattr(o.scored, "read_scores", None)) for kind, o in parts]  # fmt: skip
    return OpenAIModerationResult(**openai_result(scored, profile))


def _inputs(value) -> list[list[tuple[str, str]]]:
    """OpenAI's `input` as a list of inputs, each a list of (kind, text or image URL) parts."""
    if isinstance(value, str):
        return [[("text", value)]]
    if not isinstance(value, list) or not value:
        raise InvalidRequest("input must be a string, an array of strings or an array of text and image_url parts.")
    if all(isinstance(item, str) for item in value):
        return [[("text", item)] for item in value]
    if not all(isinstance(item, dict) for item in value):
        raise InvalidRequest("input must not mix strings and parts.")
    return [[_part(item) for item in value]]


def _part(item: dict) -> tuple[str, str]:
    if item.keys() == {"type", "text"} and item["type"] == "text" and isinstance(item["text"], str):
        return "text", item["text"]
    image = item.get("image_url")
    if item.keys() == {"type", "image_url"} and item["type"] == "image_url" and isinstance(image, dict) \
            and isinstance(image.get("url"), str):
        return "image", image["url"]
    raise InvalidRequest('Each part is {"type": "text", "text": "..."} or {"type": "image_url", "image_url": {"url"}}.')


def _image_bytes(url: str, max_bytes: int) -> bytes:
    """A data: URL's image, within the plan's bytes (the same 413 as a form's upload: serve_app/bodies.py), its
    base64 refused past their size before it is decoded."""
    match = DATA_URL.fullmatch(url)
    if match is None:
        raise InvalidRequest(NO_FETCH)
    if len(match.group(1)) > _base64_chars(max_bytes):
        raise image_too_large(max_bytes)
    try:
        data = base64.b64decode(match.group(1), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("The data: URL's base64 is not valid.") from None
    if len(data) > max_bytes:
        raise image_too_large(max_bytes)
    return data


def _base64_chars(data_bytes: int) -> int:
    """The most characters base64 takes for `data_bytes` bytes (4 per 3, with padding)."""
    return data_bytes * 4 // 3 + 4
