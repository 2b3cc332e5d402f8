"""The public API: moderate an image or a text, report content, read a review item's status."""

from __future__ import annotations

from typing import TypeVar

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import ValidationError

from models.image_upload import ScoredImage
from moderation.errors import ModelUnavailable
from moderation.flow import Caller, Moderated
from moderation.items import image_item, text_item
from moderation.limits import BATCH_TEXT_LIMITS, check_texts, parse_threshold, require_scope
from policy.types import PRIMARY_CATEGORIES, Profile
from serve_app import errors
from serve_app.auth import admitted_caller, authenticated_caller, services
from serve_app.bodies import json_bytes_for, read_image_form, read_json
from serve_app.form_reader import FORM_OVERHEAD_BYTES, PartTooLarge, read_form
from serve_app.schemas import (
    BODY_ROUTE_ERRORS,
    MODERATE_IMAGE_BODY,
    MODERATE_TEXT_BODY,
    OK_HEADERS,
    REPORT_BODY,
    Health,
    ImageQueueFullBody,
    ImageRawScores,
    ImageResult,
    ReportResult,
    ReviewItemView,
    TextBatchResult,
    TextReadView,
    TextModerationRequest,
    TextQueueFullBody,
    TextRawScores,
    TextResult,
    checked_image_url,
    error_responses,
    review_id,
    with_queue_full,
)

router = APIRouter()
R = TypeVar("R", ImageResult, TextResult, TextBatchResult)

THRESHOLD_QUERY = Query(
    default=None, description="Block threshold for this request (0..1); the decision becomes binary.",
    # Read as a string and parsed by the flow (400 invalid_threshold); documented as what it must be.
    json_schema_extra={"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}]},
)
# Anything else is no item at all: 404 not_found (schemas.REVIEW_ID); documented, not validated by FastAPI.
REVIEW_ID_PATH = Path(json_schema_extra={"pattern": "^[0-9]{1,18}$", "examples": ["1"]})


# The categories every image and every text is scored for: the raw scores of the native results.
NSFW, TOXIC = PRIMARY_CATEGORIES["image"], PRIMARY_CATEGORIES["text"]


@router.post(
    "/v1/moderate", response_model=ImageResult, response_model_exclude_none=True, openapi_extra=MODERATE_IMAGE_BODY,
    responses={**OK_HEADERS, **with_queue_full(error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413), ImageQueueFullBody)},
)
async def moderate_image(
    request: Request,
    threshold: str | None = THRESHOLD_QUERY,
    caller: Caller = Depends(admitted_caller("image"), scope="function"),
) -> ImageResult:
    require_scope(caller.plan, "image")
    override = parse_threshold(threshold)
    data, fields = await read_image_form(request, caller.plan)

    # Decoding runs on the model side, inside the flow's scoring, after the quota unit is taken: no pixel
    # is decoded for a caller without quota.
    item = image_item(caller.plan, caller.profile, data, reference=fields.get("reference"),
                      image_url=_image_url_of(fields))  # fmt: skip
    [outcome] = await services(request).flow.moderate_many(caller, [item], threshold=override)
    image = outcome.scored
    request.state.log_fields.update(
        format=image.format, width=image.width, height=image.height,
        scores=image.categories, decision=outcome.decision.decision,
    )  # fmt: skip
    result = ImageResult(scores=ImageRawScores(nsfw=image.categories[NSFW], safe=image.safe),
                         text_read=_text_read(image, caller.profile), **_result_fields(outcome))  # fmt: skip
    return _unless_unqueued(result, [outcome])


@router.post(
    "/v1/moderate-text", response_model=TextResult | TextBatchResult, response_model_exclude_none=True, openapi_extra=MODERATE_TEXT_BODY,
    responses={**OK_HEADERS, **with_queue_full(error_responses(*BODY_ROUTE_ERRORS, 402, 403, 413), TextQueueFullBody)},
)
async def moderate_text(
    request: Request,
    threshold: str | None = THRESHOLD_QUERY,
    caller: Caller = Depends(admitted_caller("text"), scope="function"),
) -> TextResult | TextBatchResult:
    """One text (`{"text": ...}`), or a batch (`{"texts": [...]}`: one unit, one decision per item)."""
    limit = json_bytes_for(caller.plan.text_max_chars * BATCH_TEXT_LIMITS)
    raw = await read_json(request, caller, "text", limit, '{"text": "..."} or {"texts": ["...", ...]}')
    override = parse_threshold(threshold)
    batch = "texts" in raw and "text" not in raw
    payloads = _batch_payloads(raw["texts"]) if batch else [_text_request(raw)]
    check_texts([payload.text for payload in payloads], caller.plan)
    request.state.log_fields.update(text_chars=sum(len(payload.text) for payload in payloads))

    items = [text_item(caller.profile, p.text, reference=p.reference, image_url=p.image_url) for p in payloads]
    outcomes = await services(request).flow.moderate_many(caller, items, threshold=override)
    results = [TextResult(scores=_text_raw_scores(o), cascade_route=getattr(o.scored, "cascade_route", None),
                          **_result_fields(o)) for o in outcomes]  # fmt: skip
    if batch:
        request.state.log_fields.update(items=len(outcomes), decisions=[o.decision.decision for o in outcomes])
        return _unless_unqueued(TextBatchResult(results=results), outcomes)
    request.state.log_fields.update(scores=outcomes[0].scored.categories, decision=outcomes[0].decision.decision)
    return _unless_unqueued(results[0], outcomes)


@router.post(
    "/v1/report", response_model=ReportResult, response_model_exclude_none=True, openapi_extra=REPORT_BODY,
    responses={**OK_HEADERS, **error_responses(*BODY_ROUTE_ERRORS)},
)
async def report(request: Request, caller: Caller = Depends(authenticated_caller)) -> ReportResult:
    try:
        form = await read_form(request, max_file_bytes=0)
    except PartTooLarge:  # the whole form past FORM_OVERHEAD_BYTES (a file part is refused at its headers)
        raise errors.InvalidRequest(f"A report is at most {FORM_OVERHEAD_BYTES} bytes of form fields.") from None
    reference = form.fields.get("reference", "").strip()
    if not reference:
        raise errors.NoReference()
    result = await services(request).reviews.report(
        account=caller.account,
        reference=reference,
        image_url=_image_url_of(form.fields),
        threshold=caller.profile.report_threshold,
    )
    return ReportResult.model_validate(result, from_attributes=True)


@router.get(
    "/v1/review/{item_id}", response_model=ReviewItemView, response_model_exclude_none=True,
    responses={**OK_HEADERS, **error_responses(401, 404, 429, 503)},
)
async def review_status(
    request: Request, item_id: str = REVIEW_ID_PATH, caller: Caller = Depends(authenticated_caller)
) -> ReviewItemView:
    item = await services(request).reviews.get(review_id(item_id), account=caller.account)
    if item is None:
        raise errors.NoSuchReviewItem()
    return ReviewItemView(**item.model_dump(exclude={"account", "scores", "model_version"}))


@router.get("/healthz", response_model=Health, responses={**OK_HEADERS, **error_responses(503)})
async def healthz(request: Request) -> Health:
    """From the ingress's health snapshot (serve_app/health.py), refreshed in the background: a call costs no
    deployment call and no store round trip, however many arrive."""
    snapshot = await services(request).health.current()
    if snapshot.store_error is not None:
        raise errors.StoreUnavailable(snapshot.store_error)
    if snapshot.models is None:
        raise ModelUnavailable("The models are not ready yet.")
    return Health(status="ok", models=snapshot.models)


def _unless_unqueued(result: R, outcomes: list[Moderated]) -> R:
    """The result, unless a `review` decision of it could not be queued (the account holds its cap of pending
    items, moderation/flow.py `_queued_review`): then 429 `review_queue_full` with the result beside the error, so
    the client has its scores and decisions (the unit is charged) and knows no moderator will see the content."""
    if any(o.decision.decision == "review" and o.review_id is None for o in outcomes):
        raise errors.QueueFull(
            "The account's review queue holds its limit of pending items: a review decision was not queued (no "
            "review_id). The result is in 'result'; do not resend the content, queue it for review yourself.",
            extra={"result": result.model_dump(mode="json", exclude_none=True)},
        )
    return result


def _result_fields(outcome: Moderated) -> dict:
    """The fields image and text results share: the categories scored, the decision, the review item."""
    scored = outcome.scored
    match = outcome.hash_match
    hash_match = {"review_id": match.review_id, "distance": match.distance} if match is not None else None
    return {"categories": scored.categories, "model_version": scored.model_version, "review_id": outcome.review_id,
            "hash_match": hash_match, **outcome.decision.answer_fields()}  # fmt: skip


def _text_read(image: ScoredImage, profile: Profile) -> TextReadView | None:
    """What was read on the image, its text only where the profile asks for it (it is content)."""
    read = image.read
    if read is None:
        return None
    return TextReadView(lines=read.lines, partial=read.partial, text=read.text if profile.answer_image_text else None)


def _text_raw_scores(outcome: Moderated) -> TextRawScores:
    unsafe = outcome.scored.categories[TOXIC]
    return TextRawScores(unsafe=unsafe, safe=1.0 - unsafe)


def _image_url_of(fields: dict[str, str]) -> str | None:
    try:
        return checked_image_url(fields.get("image_url"))
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc)) from None


def _batch_payloads(texts) -> list[TextModerationRequest]:
    """`texts` of a batch: strings, or `{"text": ...}` objects with their reference and image_url."""
    if not isinstance(texts, list):
        raise errors.InvalidRequest("texts must be an array of strings or of {\"text\": ...} objects.")
    return [_text_request(item if isinstance(item, dict) else {"text": item}) for item in texts]


def _text_request(raw: dict) -> TextModerationRequest:
    if "text" not in raw:
        raise errors.InvalidRequest("The field 'text' is required.")
    try:
        return TextModerationRequest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise errors.InvalidRequest(f"{where}: {first['msg']}") from None
