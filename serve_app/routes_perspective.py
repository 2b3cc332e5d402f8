"""Perspective-compatible API: `comments:analyze`, `comments:suggestscore` and the discovery document.

Coral Talk, forum bots and `googleapiclient` scripts call it unchanged. The key comes in `?key=` (Perspective's
way) or as a Bearer header; the key's plan and profile apply, and an analysis goes through the same flow as
`/v1/moderate-text` (one unit, decided and queued by the profile). Attributes are mapped by
`moderation.compat_mapping`; errors answer in Google's envelope with Perspective's `errorType`
(`serve_app.errors.ENVELOPES`).
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ValidationError

from models.text_scoring import TextRequest, TextScores
from moderation.compat_mapping import PERSPECTIVE_ATTRIBUTES, language_code, sentence_spans, unsupported_attribute
from moderation.errors import TextTooLong
from moderation.flow import ITEMS_IN_FLIGHT, Caller, require_scope
from policy.feedback import suggestion
from serve_app.auth import key_param_caller, services
from serve_app.bodies import json_bytes_for, json_object, read_body
from serve_app.errors import AttributeNotSupported, CommentEmpty, InvalidRequest, NotFound
from serve_app.schemas import BODY_ROUTE_ERRORS, OK_HEADERS, GoogleErrorBody, error_responses

router = APIRouter()
DISCOVERY = json.loads((Path(__file__).with_name("perspective_discovery.json")).read_text())
SPAN_CHARS = 160  # a span is a sentence, cut at this many characters (the text model's window)
MAX_SUGGESTED_ATTRIBUTES = 32
ERRORS = {**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413, body=GoogleErrorBody)}


def _body_schema(name: str) -> dict:
    """The request body as the discovery document describes it, for the OpenAPI document."""
    properties = {k: {"type": v.get("type", "object")} for k, v in DISCOVERY["schemas"][name]["properties"].items()}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties}}}}}  # fmt: skip


class Score(BaseModel):
    value: float
    type: str = "PROBABILITY"


class SpanScore(BaseModel):
    begin: int
    end: int
    score: Score


class AttributeScores(BaseModel):
    summaryScore: Score
    spanScores: list[SpanScore] | None = None


class AnalyzeCommentResponse(BaseModel):
    attributeScores: dict[str, AttributeScores]
    languages: list[str]
    clientToken: str | None = None


class SuggestCommentScoreResponse(BaseModel):
    clientToken: str | None = None
    requestedLanguages: list[str] = []


@dataclass(frozen=True)
class SpannedScores:
    """The text model's answer for the whole comment, and per span (begin, end, categories)."""

    categories: dict[str, float]
    model_version: str
    spans: list[tuple[int, int, dict[str, float]]]


@router.post(
    "/v1alpha1/comments:analyze", response_model=AnalyzeCommentResponse, response_model_exclude_none=True,
    openapi_extra=_body_schema("AnalyzeCommentRequest"), responses=ERRORS,
)
async def analyze(request: Request, caller: Caller = Depends(key_param_caller)) -> AnalyzeCommentResponse:
    svc, plan = services(request), caller.plan
    require_scope(plan, "text")
    too_long = TextTooLong(f"Comment text is above the plan's limit of {plan.text_max_chars} characters.")
    raw = json_object(await read_body(request, json_bytes_for(plan.text_max_chars), too_long), '{"comment": ...}')
    text = _comment_text(raw)
    if len(text) > plan.text_max_chars:
        raise too_long
    languages = _strings(raw, "languages")
    wanted = _requested(raw, languages)
    if not wanted:
        raise AttributeNotSupported("None of the requested attributes is served for the request languages.")
    request.state.log_fields.update(text_chars=len(text), attributes=sorted(wanted))

    spans = sentence_spans(text, SPAN_CHARS) if raw.get("spanAnnotations") is True else []
    item = svc.text_item(caller, text, tuple(PERSPECTIVE_ATTRIBUTES[name] for name in wanted))
    slots = asyncio.Semaphore(ITEMS_IN_FLIGHT)

    async def scored(request: TextRequest) -> TextScores:
        async with slots:
            return await svc.backends.score_text(request)

    async def score_with_spans(whole: TextRequest) -> SpannedScores:
        parts = [TextRequest(text=text[b:e], categories=whole.categories) for b, e in spans]
        answers = await asyncio.gather(scored(whole), *(scored(part) for part in parts))
        per_span = [(b, e, answer.categories) for (b, e), answer in zip(spans, answers[1:])]
        return SpannedScores(answers[0].categories, answers[0].model_version, per_span)

    [outcome] = await svc.flow.moderate_many(caller, [replace(item, score=score_with_spans)])
    request.state.log_fields.update(scores=outcome.scores, decision=outcome.decision.decision)
    answer = {}
    for name, threshold in wanted.items():
        category = PERSPECTIVE_ATTRIBUTES[name]
        value = outcome.scores[category]
        if value < threshold:
            continue  # Perspective leaves out what scores below the requested scoreThreshold
        span_scores = [SpanScore(begin=b, end=e, score=Score(value=s[category])) for b, e, s in outcome.scored.spans]
        answer[name] = AttributeScores(summaryScore=Score(value=value), spanScores=span_scores or None)
    token = raw.get("clientToken") if isinstance(raw.get("clientToken"), str) else None
    return AnalyzeCommentResponse(attributeScores=answer, languages=[language_code(t) for t in languages], clientToken=token)


@router.post(
    "/v1alpha1/comments:suggestscore", response_model=SuggestCommentScoreResponse, response_model_exclude_none=True,
    openapi_extra=_body_schema("SuggestCommentScoreRequest"), responses=ERRORS,
)
async def suggest_score(request: Request, caller: Caller = Depends(key_param_caller)) -> SuggestCommentScoreResponse:
    """Recorded per account as feedback (attribute, score, client token, time; never the text); no quota unit."""
    svc = services(request)
    limit = json_bytes_for(caller.plan.text_max_chars)
    raw = json_object(await read_body(request, limit, TextTooLong(f"The request is above {limit} bytes.")),
                      '{"comment": ..., "attributeScores": ...}')  # fmt: skip
    scores, token = raw.get("attributeScores"), raw.get("clientToken")
    if not isinstance(scores, dict) or not 1 <= len(scores) <= MAX_SUGGESTED_ATTRIBUTES:
        raise InvalidRequest(f"attributeScores must map 1 to {MAX_SUGGESTED_ATTRIBUTES} attributes to their scores.")
    if token is not None and not isinstance(token, str):
        raise InvalidRequest("clientToken must be a string.")
    try:
        entries = [suggestion(str(name), _summary_value(value), token) for name, value in scores.items()]
    except (ValidationError, TypeError, ValueError):
        raise InvalidRequest("Each attribute score is {\"summaryScore\": {\"value\": 0..1}}; clientToken at most "
                             "256 characters; attribute names at most 64.") from None  # fmt: skip
    await svc.feedback.record(caller.account, entries)
    request.state.log_fields.update(suggestions=len(entries))
    return SuggestCommentScoreResponse(clientToken=token, requestedLanguages=_strings(raw, "languages"))


@router.get("/$discovery/rest", include_in_schema=False)
async def discovery(request: Request, version: str = "v1alpha1") -> dict:
    """The discovery document `googleapiclient.discovery.build(..., discoveryServiceUrl=...)` reads."""
    if version != "v1alpha1":
        raise NotFound(f"No discovery document for version {version[:40]!r}.")
    document = copy.deepcopy(DISCOVERY)
    document["rootUrl"] = document["baseUrl"] = str(request.base_url)
    return document


def _comment_text(raw: dict) -> str:
    comment = raw.get("comment")
    if not isinstance(comment, dict) or not isinstance(comment.get("text"), str):
        raise InvalidRequest("comment.text is required and must be a string.")
    try:
        comment["text"].encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest("comment.text must be valid Unicode.") from None
    if not comment["text"].strip():
        raise CommentEmpty()
    return comment["text"]


def _strings(raw: dict, field: str) -> list[str]:
    values = raw.get(field, [])
    if not isinstance(values, list) or not all(isinstance(v, str) and len(v) <= 35 for v in values) or len(values) > 16:
        raise InvalidRequest(f"{field} must be an array of language codes.")
    return values


def _requested(raw: dict, languages: list[str]) -> dict[str, float]:
    """Requested attribute -> its scoreThreshold (0 when none); an unserved one fails unless it is to be dropped."""
    attributes = raw.get("requestedAttributes")
    if not isinstance(attributes, dict) or not attributes or len(attributes) > MAX_SUGGESTED_ATTRIBUTES:
        raise InvalidRequest("requestedAttributes must name at least one attribute, e.g. {\"TOXICITY\": {}}.")
    drop = raw.get("dropUnsupportedAttributes") is True
    wanted = {}
    for name, options in attributes.items():
        options = options if options is not None else {}
        threshold = options.get("scoreThreshold", 0.0) if isinstance(options, dict) else None
        if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
            raise InvalidRequest(f"requestedAttributes.{name[:64]} must be {{\"scoreThreshold\": 0..1}} or {{}}.")
        if options.get("scoreType", "PROBABILITY") not in ("PROBABILITY", "SCORE_TYPE_UNSPECIFIED"):
            raise InvalidRequest("Only scoreType PROBABILITY is served.")
        why = unsupported_attribute(name, languages)
        if why is None:
            wanted[name] = float(threshold)
        elif not drop:
            raise AttributeNotSupported(why[:300])
    return wanted


def _summary_value(value) -> float | None:
    if not isinstance(value, dict) or not isinstance(value.get("summaryScore"), dict):
        raise ValueError("no summaryScore")
    number = value["summaryScore"].get("value")
    if not isinstance(number, int | float) or isinstance(number, bool):
        raise ValueError("not a number")
    return float(number)
