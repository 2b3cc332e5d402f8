"""Perspective-compatible API: `comments:analyze`, `comments:suggestscore` and the discovery document.

Coral Talk, forum bots and `googleapiclient` scripts call it unchanged. The key comes in `?key=` (Perspective's
way) or as a Bearer header; the key's plan and profile apply, and an analysis goes through the same flow as
`/v1/moderate-text` (one unit, decided and queued by the profile). Attributes are mapped by
`moderation.compat_mapping`; errors answer in Google's envelope with Perspective's `errorType`
(`serve_app.errors.ENVELOPES`). As Perspective does, the answer's `languages` are the request's when it names some,
else the likeliest detected one, and `detectedLanguages` lists what the detector found.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ValidationError

from models import language_id
from moderation.compat_mapping import PERSPECTIVE_ATTRIBUTES, language_code, sentence_spans, unsupported_attribute
from moderation.errors import ModerationError
from moderation.flow import Caller, Moderated
from moderation.items import text_item
from moderation.limits import MAX_SPANS_PER_COMMENT, check_texts
from store.score_suggestions import Suggestion, suggestion
from serve_app.auth import admitted_caller, key_param_caller, services
from serve_app.bodies import json_bytes_for, read_json
from serve_app.errors import AttributeNotSupported, CommentEmpty, InvalidRequest, NotFound
from serve_app.schemas import BODY_ROUTE_ERRORS, OK_HEADERS, GoogleErrorBody, error_responses

router = APIRouter()
log = logging.getLogger("moderation.perspective")
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
    languages: list[str]  # Perspective's: the request's `languages` when it names some, else the likeliest detected
    detectedLanguages: list[str]  # likeliest first (models/language_id.py); empty when no language is likely
    clientToken: str | None = None


class SuggestCommentScoreResponse(BaseModel):
    clientToken: str | None = None
    requestedLanguages: list[str] = []


@router.post(
    "/v1alpha1/comments:analyze", response_model=AnalyzeCommentResponse, response_model_exclude_none=True,
    openapi_extra=_body_schema("AnalyzeCommentRequest"), responses=ERRORS,
)
async def analyze(
    request: Request, caller: Caller = Depends(admitted_caller("text", key_in_query=True), scope="function")
) -> AnalyzeCommentResponse:
    # The comment is scored for the requested attributes, and its sentences too with `spanAnnotations`, in one model
    # call; one unit, and one more for the spans (moderation/items.py: Item.units), decided and queued by the profile.
    # (No docstring: it would become the operation's description.)
    raw = await read_json(request, caller, "text", json_bytes_for(caller.plan.text_max_chars), '{"comment": ...}')
    text = _comment_text(raw)
    check_texts([text], caller.plan)
    languages = _strings(raw, "languages")
    wanted = _requested(raw, languages)
    if not wanted:
        raise AttributeNotSupported("None of the requested attributes is served for the request languages.")
    request.state.log_fields.update(text_chars=len(text), attributes=sorted(wanted))

    spans = sentence_spans(text, SPAN_CHARS, MAX_SPANS_PER_COMMENT) if raw.get("spanAnnotations") is True else []
    item = text_item(caller.profile, text, requested=[PERSPECTIVE_ATTRIBUTES[name] for name in wanted], spans=spans)
    [outcome] = await services(request).flow.moderate_many(caller, [item])
    request.state.log_fields.update(scores=outcome.scored.categories, decision=outcome.decision.decision)
    token = raw.get("clientToken") if isinstance(raw.get("clientToken"), str) else None
    detected = [language for language, _ in language_id.detect(text)]
    used = [language_code(tag) for tag in languages] if languages else detected[:1]
    return AnalyzeCommentResponse(attributeScores=_attribute_scores(wanted, spans, outcome), languages=used,
                                  detectedLanguages=detected, clientToken=token)  # fmt: skip


@router.post(
    "/v1alpha1/comments:suggestscore", response_model=SuggestCommentScoreResponse, response_model_exclude_none=True,
    openapi_extra=_body_schema("SuggestCommentScoreRequest"), responses=ERRORS,
)
async def suggest_score(request: Request, caller: Caller = Depends(key_param_caller)) -> SuggestCommentScoreResponse:
    """Recorded per account as feedback (attribute, score, client token, time; never the text); no quota unit.

    With the comment's text, a suggestion also teaches the account's line: TOXICITY at or above 0.5 (or Coral's
    `DELETED`) is a harmful label, below it (or `APPROVED`) a fine one, kept as `POST /v1/feedback` keeps one
    (serve_app/routes_feedback.py: the embedding and scores, never the text)."""
    limit = json_bytes_for(caller.plan.text_max_chars)
    raw = await read_json(request, caller, None, limit, '{"comment": ..., "attributeScores": ...}')
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
    await services(request).feedback.record(caller.account, entries)
    harmful = suggested_label(entries)
    comment = raw.get("comment")
    text = comment.get("text") if isinstance(comment, dict) else None
    if harmful is not None and isinstance(text, str) and text.strip() and caller.plan.covers("text"):
        check_texts([text], caller.plan)
        try:
            await services(request).flow.keep_reported_label(caller, text, harmful)
        except ModerationError as exc:  # the suggestion is recorded: a retry would record it twice, so no 503
            log.warning("a suggestion's label was not kept: %s", type(exc).__name__)
    request.state.log_fields.update(suggestions=len(entries), label=harmful)
    return SuggestCommentScoreResponse(clientToken=token, requestedLanguages=_strings(raw, "languages"))


@router.get("/$discovery/rest", include_in_schema=False)
async def discovery(request: Request, version: str = "v1alpha1") -> dict:
    """The discovery document `googleapiclient.discovery.build(..., discoveryServiceUrl=...)` reads."""
    if version != "v1alpha1":
        raise NotFound(f"No discovery document for version {version[:40]!r}.")
    document = copy.deepcopy(DISCOVERY)
    document["rootUrl"] = document["baseUrl"] = str(request.base_url)
    return document


def _attribute_scores(wanted: dict[str, float], spans: list[tuple[int, int]], outcome: Moderated) -> dict:
    """Perspective's `attributeScores`: each wanted attribute at or above its scoreThreshold (Perspective leaves out
    the others), with its score per span when spans were asked for."""
    answer = {}
    for name, threshold in wanted.items():
        category = PERSPECTIVE_ATTRIBUTES[name]
        value = outcome.scored.categories[category]
        if value >= threshold:
            per_span = [SpanScore(begin=begin, end=end, score=Score(value=scores[category]))
                        for (begin, end), scores in zip(spans, outcome.span_scores)]  # fmt: skip
            answer[name] = AttributeScores(summaryScore=Score(value=value), spanScores=per_span or None)
    return answer


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


def suggested_label(entries: list[Suggestion]) -> bool | None:
    """Harmful (True), fine (False) or no label: TOXICITY's score against even odds, else Coral's moderator
    decision (`DELETED` / `APPROVED`, score 1)."""
    by_name = {entry.attribute: entry.score for entry in entries}
    if by_name.get("TOXICITY") is not None:
        return by_name["TOXICITY"] >= 0.5
    if by_name.get("DELETED"):
        return True
    if by_name.get("APPROVED"):
        return False
    return None


def _summary_value(value) -> float | None:
    if not isinstance(value, dict) or not isinstance(value.get("summaryScore"), dict):
        raise ValueError("no summaryScore")
    number = value["summaryScore"].get("value")
    if not isinstance(number, int | float) or isinstance(number, bool):
        raise ValueError("not a number")
    return float(number)
