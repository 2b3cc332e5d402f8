"""The steps every moderation request takes once its body is read and its items are built (`moderation.items`).

Take the items' quota units (`Item.units`), score (the request's texts in one model call, each image in its own; an
image is decoded on the model side, as part of its scoring), decide, queue a `review` decision. The units are taken
before any costly work, and given back to the month they were taken from if the request then fails (invalid content
or our own failure); a client that hangs up mid-request keeps them spent, since the work was done (every part of a
refund: store/keys/quota.py). Route handlers read the body; this module runs the rest and raises
`moderation.errors`, never HTTP errors.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from models.image_decoding import ImageRefused
from models.image_upload import ImageUpload, ScoredImage
from adaptation.labels import label_from_document
from models.text_scoring import TextEvidence, TextRequest, TextScores
from moderation.model_gates import ModelGates
from moderation.backends import ModelBackends
from moderation.errors import ModelUnavailable, ModerationError, QuotaExceeded, TooManyInFlight
from moderation.items import Item, deciding_limits, read_text_request
from moderation.label_evidence import evidence_fields, label_evidence
from moderation.limits import is_short_text_work
from moderation.text_correction import AccountCorrections, corrected
from policy.decisions import HASH_MATCH, Decision, strictest_text_score
from moderation.hash_matching import BankMatch, BankMatcher, bankable_hash, hash_checked
from store.keys.quota import QuotaStore, Taken, WorkSlot
from store.labels.labels import LabelStore
from store.review.queue import DailyAuditsSpent, ReviewQueue, ReviewQueueFull
from policy.types import IMAGE_TEXT_CATEGORY, ApiKey, Plan, Profile, ReviewReason

log = logging.getLogger("moderation.flow")
T = TypeVar("T")


class Scored(Protocol):
    """What a model answers: the ImageModel's ScoredImage and the TextModel's TextScores both have these."""

    @property
    def categories(self) -> dict[str, float]: ...

    @property
    def model_version(self) -> str: ...


@dataclass(frozen=True)
class FirstUnit:
    """A request's first quota unit and its work slot, taken in the step that authorized it (serve_app/auth.py),
    held by `first_unit_held` around the whole request."""

    charged_at: float
    slot: WorkSlot


@dataclass(frozen=True)
class Caller:
    """An authenticated request's key with its plan and profile, and its first unit when admission took it."""

    key: ApiKey
    plan: Plan
    profile: Profile
    first_unit: FirstUnit | None = None

    @property
    def account(self) -> str:
        return self.key.account


@dataclass(frozen=True)
class Moderated:
    """One item's outcome: its model's answer as is (an image's also says what was decoded), the profile's decision,
    the review item it queued, and its spans' scores (`Item.spans`, in order)."""

    scored: Scored
    decision: Decision
    review_id: int | None = None
    span_scores: tuple[dict[str, float], ...] = ()
    span_evidence: tuple[TextEvidence | None, ...] = ()  # each span's embedding (Perspective's scale reads it)
    hash_match: BankMatch | None = None  # the banked hash of a rejected image this one matched (then a block)


class ModerationFlow:
    def __init__(
        self, quota: QuotaStore, reviews: ReviewQueue, backends: ModelBackends, inference_timeout_s: float,
        hash_matcher: BankMatcher | None = None, *, gates: ModelGates | None = None,
        labels: LabelStore | None = None, corrections: AccountCorrections | None = None,
        draw: Callable[[], float] = random.random,
    ):
        """`gates`: each model's gate (moderation/model_gates.py); None lets every call through at once.
        `labels`: where reported labels go; `corrections`: the accounts' live corrections (None: none applied);
        `draw`: a uniform number in [0, 1) per allowed item, against the profile's `audit_rate`."""
        self.quota, self.reviews, self.backends = quota, reviews, backends
        self.inference_timeout_s, self.hash_matcher, self.gates = inference_timeout_s, hash_matcher, gates
        self.labels, self.corrections, self.draw = labels, corrections, draw

    async def moderate_many(
        self, caller: Caller, items: Sequence[Item], *, threshold: float | None = None
    ) -> list[Moderated]:
        """One unit per item (two for a text with spans: `Item.units`), all or none; every item scored (a text's
        toxic score through the account's live correction, if any), then all decided in one Policy call; then a
        review queued per item decided `review`, and an audit per allowed item drawn at the profile's `audit_rate`.
        Any failure gives every unit back and raises."""
        async with _Charged(self.quota, caller, sum(item.units for item in items)):
            limits = deciding_limits(caller.profile, threshold)
            routed = [item.routed_for(caller.account, limits) for item in items]
            answers = await self._corrected(caller, await self._scored(caller, routed, threshold))
            decisions = await self._call_model(
                self.backends.decide_many(
                    [(scored.categories, item.kind) for item, (scored, _) in zip(items, answers)],
                    caller.profile,
                    threshold,
                ),
                "policy",
            )
            scored = [answer for answer, _ in answers]
            decisions, matches = await hash_checked(self.hash_matcher, caller.account, items, scored, decisions)
            return [
                Moderated(scored, decision, await self._queued_review(caller, item, scored, decision),
                          span_scores=tuple(span.categories for span in spans), hash_match=match,
                          span_evidence=tuple(span.evidence for span in spans))  # fmt: skip
                for item, (scored, spans), decision, match in zip(items, answers, decisions, matches)
            ]

    async def _scored(
        self, caller: Caller, items: Sequence[Item], threshold: float | None = None
    ) -> list[tuple[Scored, tuple[TextScores, ...]]]:
        """Each item's model answer and its spans' answers: every text of the request (spans included) in one model
        call, which costs the model one place in its queue however many texts; each image in a call of its own (and
        the words read on it in one more). Each call waits at its model's gate first, within the call's time
        limit."""
        texts = [request for item in items if item.kind == "text" for request in (item.content, *item.span_requests())]
        images = [self._call_model(self._image_scored(caller, item.content, threshold))
                  for item in items if item.kind == "image"]  # fmt: skip
        # Short and long text work queue apart, as they run apart on the model (its two lanes).
        text_kind = "text" if is_short_text_work([request.text for request in texts]) else "long_text"
        text_call = self._call_model(self._gated(text_kind, caller, lambda: self._score_texts(texts))) if texts \
            else _no_texts()
        text_answers, *image_answers = await _all_or_none([text_call, *images])
        text_answers, image_answers = iter(text_answers), iter(image_answers)
        answers = []
        for item in items:
            if item.kind == "image":
                answers.append((next(image_answers), ()))
            else:
                whole = next(text_answers)
                answers.append((whole, tuple(next(text_answers) for _ in item.spans)))
        return answers

    async def _image_scored(self, caller: Caller, upload: ImageUpload, threshold: float | None) -> ScoredImage:
        """An image scored and, when its profile enables `text_toxic`, the words read on it scored by the text
        model as a comment would be, after the image's own call and within the same time limit; `text_toxic` is the
        text's strictest category on text_toxic's own thresholds, so it recommends what the comment's decision would.
        Nothing read: `text_toxic` is 0 and no text call is made."""
        kind = "image_text" if upload.read_text else "image"
        scored = await self._gated(kind, caller, lambda: self.backends.score_upload(upload))
        if scored.read is None or not scored.read.text:
            return scored
        request = read_text_request(caller.profile, scored.read.text, caller.account, threshold)
        kind = "text" if is_short_text_work([request.text]) else "long_text"
        text = await self._gated(kind, caller, lambda: self.backends.score_text(request))
        read_score = strictest_text_score(text.categories, caller.profile, IMAGE_TEXT_CATEGORY, threshold)
        return replace(scored, read_scores=text.categories, read_scored_by=text.model_version, read_score=read_score)

    async def _gated(self, kind: str, caller: Caller, call: Callable[[], Awaitable[T]]) -> T:
        if self.gates is None:
            return await call()
        async with self.gates.passed(kind, caller.account):
            return await call()

    async def _score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        if len(requests) == 1 and is_short_text_work([requests[0].text]):
            # One short text alone takes the model deployment's own batching (@serve.batch), with other requests'
            # short texts; a long one would make every text of that batch wait for its windows.
            return [await self.backends.score_text(requests[0])]
        return await self.backends.score_texts(requests)

    async def _corrected(
        self, caller: Caller, answers: list[tuple[Scored, tuple[TextScores, ...]]]
    ) -> list[tuple[Scored, tuple[TextScores, ...]]]:
        """Each text's answer through the account's live correction (its spans' scores stay the served ones; every
        part of the correction, its fit included: adaptation/correction.py)."""
        if self.corrections is None or not any(isinstance(scored, TextScores) for scored, _ in answers):
            return answers
        correction = await self.corrections.live(caller.account)
        if correction is None:
            return answers
        return [(corrected(scored, correction) if isinstance(scored, TextScores) else scored, spans)
                for scored, spans in answers]  # fmt: skip

    async def _queued_review(self, caller: Caller, item: Item, scored: Scored, decision: Decision) -> int | None:
        """The review item a `review` decision queued. None for a `review` decision means the account holds its cap
        of pending items and nothing was queued: the decision stands and its result is still answered (the routes
        say so: 429 `review_queue_full` with the result); the work was done, so the unit stays charged.

        An item no moderator would otherwise see, allowed or blocked by the models, is audited at the profile's
        `audit_rate`: queued with reason `audit`, its answer unchanged (no `review_id`; a full queue or the day's cap
        of audits just skips it). Blocked ones too: without them an account's backtest never sees its false blocks,
        and undercounts the benign texts flagged above any threshold. A block by the hash bank is a moderator's own
        decision already: never audited."""
        if decision.decision == "review":
            return await self._queued(caller, item, scored, "model_flagged")
        audit_rate = caller.profile.audit_rate
        unseen = decision.decision == "allow" or (decision.decision == "block" and HASH_MATCH not in decision.blocked_by)
        if unseen and audit_rate > 0 and self.draw() < audit_rate:
            await self._queued(caller, item, scored, "audit")
        return None

    async def _queued(self, caller: Caller, item: Item, scored: Scored, reason: ReviewReason) -> int | None:
        seen, rate = ("audit", caller.profile.audit_rate) if reason == "audit" else ("flagged", 1.0)
        try:
            queued = await self.reviews.create(
                account=caller.account,
                reason=reason,
                kind=item.kind,
                reference=item.reference,
                image_url=item.image_url,
                scores=scored.categories,
                model_version=scored.model_version,
                pdq=bankable_hash(scored, self.hash_matcher),  # kept so that a rejection banks it
                text=_review_text(item, scored) if caller.profile.keep_review_text else None,
                profile=caller.profile.name,
                evidence=label_evidence(scored, seen, rate, caller.profile.name),
            )
        except (ReviewQueueFull, DailyAuditsSpent):
            # Debug only: an account at its cap would write a line per flagged item (the access log has the 429).
            log.debug("account %s at its cap: a %s item was not queued", caller.account, reason)
            return None
        return queued.id

    async def keep_reported_label(self, caller: Caller, text: str, harmful: bool) -> bool:
        """A label the account's backend sent (`POST /v1/feedback`, `comments:suggestscore`): the text scored as the
        profile serves it (no quota unit; the model's gate as any text), kept as a `report` label, never the
        text. False when the model gives no embedding (nothing kept)."""
        if self.labels is None:
            return False
        request = TextRequest(text, tuple(caller.profile.enabled_categories("text")))
        kind = "text" if is_short_text_work([text]) else "long_text"
        scored = await self._call_model(self._gated(kind, caller, lambda: self.backends.score_text(request)))
        document = evidence_fields(scored, "report", 1.0, caller.profile.name)
        if document is None:
            return False
        await self.labels.add_reported(caller.account, label_from_document({**document, "harmful": harmful,
                                                                            "at": time.time()}))
        return True

    async def _call_model(self, call: Awaitable[T], what: str = "model") -> T:
        """Await a model or policy call; a failure or a timeout is ModelUnavailable (the client may retry).

        An image the decoder refused is the content's answer (invalid, too large, no decode capacity), not a
        model failure: it keeps its own status."""
        try:
            return await asyncio.wait_for(call, timeout=self.inference_timeout_s)
        except (ModerationError, ImageRefused):
            raise
        except Exception as exc:  # any failure of the model side is the same retryable error
            # The type only: a model error's message may quote the content, which is never logged.
            log.warning("%s call failed: %s", what, type(exc).__name__)
            raise ModelUnavailable(
                "The policy service is unavailable; nothing was decided." if what == "policy" else None
            ) from exc


def _review_text(item: Item, scored: Scored) -> str | None:
    """What a review item shows the moderator as its text: a text's own, or the words read on an image."""
    if item.kind == "text":
        return item.content.text
    read = getattr(scored, "read", None)
    return read.text if read is not None and read.text else None


async def _no_texts() -> list[TextScores]:
    return []


async def _all_or_none(calls: list[Awaitable[T]]) -> list[T]:
    """Every call's answer, run concurrently; when one fails, the others are cancelled (the request fails, their
    work is not needed) and its error raised."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return await asyncio.gather(*tasks)
    except Exception:
        for task in tasks:
            task.cancel()
        raise


class _Charged:
    """Takes the request's quota units and its slot of the account's work in progress on entry (all or none); gives
    the slot back when the request ends, and the units when it fails.

    Any exception gives the units back: invalid content (4xx) takes no unit and our failures
    (5xx) cost the client nothing. A cancelled request (the client hung up) keeps them:
    cancellation is not an Exception, and the work was spent. The units go back to the
    month they were taken from, even when the request straddled a month's end.
    """

    def __init__(self, quota: QuotaStore, caller: Caller, units: int = 1):
        # A caller whose first unit and slot were taken when it was admitted takes the rest only; both go back with
        # `first_unit_held` around the request.
        first = caller.first_unit
        self.quota, self.caller = quota, caller
        self.units = units - 1 if first else units
        self.charged_at = first.charged_at if first else time.time()
        self.slot = None if first else WorkSlot(slot_id=new_slot_id(), max_in_flight=caller.plan.max_in_flight)

    async def __aenter__(self) -> _Charged:
        if self.units == 0:
            return self
        plan = self.caller.plan
        taken = await self.quota.take(self.caller.account, plan.monthly_quota, self.charged_at, self.units, self.slot)
        if taken is Taken.NO_QUOTA:
            raise QuotaExceeded()
        if taken is Taken.TOO_MANY_IN_FLIGHT:
            raise TooManyInFlight()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if isinstance(exc, Exception) and self.units:
            await _give_back_units(self.quota, self.caller.account, self.charged_at, self.units)
        if self.slot is not None:
            self.quota.release_slot(self.caller.account, self.slot)


def new_slot_id() -> str:
    return secrets.token_hex(8)


@asynccontextmanager
async def first_unit_held(quota: QuotaStore, caller: Caller) -> AsyncIterator[None]:
    """Around the whole of a request admitted with its first unit (`Caller.first_unit`): the unit goes back when the
    request fails (an Exception, as in `_Charged`: a 4xx of its content, our 5xx; never a client that hung up), and
    the slot when it ends, without the answer waiting for it (QuotaStore.release_slot)."""
    first = caller.first_unit
    if first is None:
        yield
        return
    try:
        yield
    except Exception:
        await _give_back_units(quota, caller.account, first.charged_at, 1)
        raise
    finally:
        quota.release_slot(caller.account, first.slot)


async def give_back_first_unit(quota: QuotaStore, account: str, first: FirstUnit) -> None:
    """For a request refused after its admission took its first unit."""
    await _give_back_units(quota, account, first.charged_at, 1)
    quota.release_slot(account, first.slot)


async def _give_back_units(quota: QuotaStore, account: str, charged_at: float, units: int) -> None:
    try:
        await quota.give_back_quota(account, charged_at, units)
    except Exception:  # the store is down too
        log.warning("could not give back the units of %s", account)
