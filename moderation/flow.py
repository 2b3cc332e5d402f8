"""The steps every moderation request takes once its body is read.

Take a quota unit, prepare the model's input, score (an image is decoded on the model side,
as part of its scoring), decide, queue a `review` decision. The unit is taken before any costly work, and given back to the month
it was taken from if the request then fails (invalid content or our own failure); a
client that hangs up mid-request keeps it spent, since the work was done. Route handlers
read the body; this module runs the rest and raises `moderation.errors`, never HTTP errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from models.image_decoding import ImageRefused
from models.text_scoring import TextRequest, TextScores
from moderation.backends import ModelBackends
from moderation.errors import (
    InvalidBatch, InvalidThreshold, ModelUnavailable, ModerationError, QuotaExceeded, ScopeNotCovered, TextTooLong,
)
from policy.decisions import Decision
from policy.limits import Limits
from policy.review_queue import ReviewQueue
from policy.types import ApiKey, ContentKind, Plan, Profile

log = logging.getLogger("moderation.flow")


class Scored(Protocol):
    """What a model answers: ImageScores and TextScores both have these."""

    @property
    def categories(self) -> dict[str, float]: ...

    @property
    def model_version(self) -> str: ...


S = TypeVar("S", bound=Scored)
R = TypeVar("R")


@dataclass(frozen=True)
class Caller:
    """An authenticated request's key with its plan and profile."""

    key: ApiKey
    plan: Plan
    profile: Profile

    @property
    def account(self) -> str:
        return self.key.account


@dataclass(frozen=True)
class Moderated(Generic[R, S]):
    prepared: R  # the model's input (an upload's bytes, a text request)
    scored: S  # the model's own answer (the image result needs its `safe` score and the decoded size)
    decision: Decision
    review_id: int | None

    @property
    def scores(self) -> dict[str, float]:
        return self.scored.categories

    @property
    def model_version(self) -> str:
        return self.scored.model_version


def require_scope(plan: Plan, kind: ContentKind) -> None:
    if not plan.covers(kind):
        raise ScopeNotCovered(f"The plan does not cover {kind} moderation.")


def parse_threshold(raw: str | None) -> float | None:
    """The `?threshold=` override: a number in [0, 1], else InvalidThreshold."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidThreshold() from None
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise InvalidThreshold()
    return value


@dataclass(frozen=True)
class Item(Generic[R, S]):
    """One piece of content of a request: how to prepare it for its model, and how to score it."""

    kind: ContentKind
    prepare: Callable[[], Awaitable[R]]
    score: Callable[[R], Awaitable[S]]
    reference: str | None = None
    image_url: str | None = None


# Items of one request scored at a time: a batch fills the model's own batch (@serve.batch, 16 texts)
# without flooding its queue (max_queued_requests) on its own.
ITEMS_IN_FLIGHT = 16


# A batch (`{"texts": [...]}` on /v1/moderate-text, an array `input` on /v1/moderations): at most this many
# items, each text within the plan's `text_max_chars`, all of them within BATCH_TEXT_LIMITS times that.
MAX_BATCH_ITEMS = 100
BATCH_TEXT_LIMITS = 10


def check_texts(texts: Sequence[str], plan: Plan) -> None:
    """The batch limits: InvalidBatch for no item or too many, TextTooLong for too many characters."""
    if not 1 <= len(texts) <= MAX_BATCH_ITEMS:
        raise InvalidBatch(f"A batch holds from 1 to {MAX_BATCH_ITEMS} items; this one has {len(texts)}.")
    for number, text in enumerate(texts):
        if len(text) > plan.text_max_chars:
            raise TextTooLong(f"Text {number} is above the plan's limit of {plan.text_max_chars} characters.")
    if sum(len(text) for text in texts) > BATCH_TEXT_LIMITS * plan.text_max_chars:
        raise TextTooLong(f"The batch is above {BATCH_TEXT_LIMITS * plan.text_max_chars} characters in all.")


class TextBatch:
    """The texts of one request scored in one model call, while the flow still sees one `score` per item.

    Every item's `score` waits on the same call, started by the first of them; all items are made (`scorer`)
    before the flow runs, so that call carries every text. A batch request then costs the model one call and one
    place in its queue, not one per text.
    """

    def __init__(self, score_texts: Callable[[list[TextRequest]], Awaitable[list[TextScores]]]):
        self._score_texts = score_texts
        self._requests: list[TextRequest] = []
        self._call: asyncio.Future | None = None

    def scorer(self, request: TextRequest) -> Callable[[TextRequest], Awaitable[TextScores]]:
        index = len(self._requests)
        self._requests.append(request)

        async def score(_prepared: TextRequest) -> TextScores:
            if self._call is None:
                self._call = asyncio.ensure_future(self._score_texts(list(self._requests)))
            # shield: one item's timeout or cancellation must not cancel the call the others wait on
            return (await asyncio.shield(self._call))[index]

        return score


def ready(value: R) -> Callable[[], Awaitable[R]]:
    """A `prepare` for content that needs no preparation (text)."""

    async def prepare() -> R:
        return value

    return prepare


class ModerationFlow:
    def __init__(self, limits: Limits, reviews: ReviewQueue, backends: ModelBackends, inference_timeout_s: float):
        self.limits, self.reviews, self.backends = limits, reviews, backends
        self.inference_timeout_s = inference_timeout_s

    async def moderate(
        self,
        caller: Caller,
        *,
        kind: ContentKind,
        prepare: Callable[[], Awaitable[R]],
        score: Callable[[R], Awaitable[S]],
        threshold: float | None,
        reference: str | None,
        image_url: str | None,
    ) -> Moderated[R, S]:
        """Charge a unit, `prepare()` the input, `score()` it (a model call), decide, queue a review."""
        item = Item(kind=kind, prepare=prepare, score=score, reference=reference, image_url=image_url)
        return (await self.moderate_many(caller, [item], threshold=threshold))[0]

    async def moderate_many(
        self, caller: Caller, items: Sequence[Item], *, threshold: float | None = None
    ) -> list[Moderated]:
        """One unit per item, all or none; every item prepared and scored (at most ITEMS_IN_FLIGHT at a time),
        then all decided in one Policy call; then a review queued per item decided `review`. Any failure gives every
        unit back and raises."""
        slots = asyncio.Semaphore(ITEMS_IN_FLIGHT)

        async def prepared_and_scored(item: Item) -> tuple:
            async with slots:
                prepared = await item.prepare()
                return prepared, await self._call_model(item.score(prepared), "model")

        async with _Charged(self.limits, caller, len(items)):
            tasks = [asyncio.ensure_future(prepared_and_scored(item)) for item in items]
            try:
                outcomes = await asyncio.gather(*tasks)
            except Exception:
                for task in tasks:  # one item failed: the request fails, the others' work is not needed
                    task.cancel()
                raise
            decisions = await self._call_model(
                self.backends.decide_many(
                    [(scored.categories, item.kind) for item, (_, scored) in zip(items, outcomes)],
                    caller.profile,
                    threshold,
                ),
                "policy",
            )
            results = []
            for item, (prepared, scored), decision in zip(items, outcomes, decisions):
                review_id = None
                if decision.decision == "review":
                    queued = await self.reviews.create(
                        account=caller.account,
                        reason="model_flagged",
                        kind=item.kind,
                        reference=item.reference,
                        image_url=item.image_url,
                        scores=scored.categories,
                        model_version=scored.model_version,
                    )
                    review_id = queued.id
                results.append(Moderated(prepared=prepared, scored=scored, decision=decision, review_id=review_id))
        return results

    async def _call_model(self, call: Awaitable[S], what: str) -> S:
        """Await a model or policy call; a failure or a timeout is ModelUnavailable (the client may retry).

        An image the decoder refused is the content's answer (invalid, too large, no decode capacity), not a
        model failure: it keeps its own status."""
        try:
            return await asyncio.wait_for(call, timeout=self.inference_timeout_s)
        except (ModerationError, ImageRefused):
            raise
        except Exception as exc:  # any failure of the model side is the same retryable error
            log.warning("%s call failed: %r", what, exc)
            raise ModelUnavailable(
                "The policy service is unavailable; nothing was decided." if what == "policy" else None
            ) from exc


class _Charged:
    """Takes the request's quota units on entry (all or none); gives them back when the request fails.

    Any exception gives it back: invalid content (4xx) takes no unit and our failures
    (5xx) cost the client nothing. A cancelled request (the client hung up) keeps it:
    cancellation is not an Exception, and the work was spent. The unit goes back to the
    month it was taken from, even when the request straddled a month's end.
    """

    def __init__(self, limits: Limits, caller: Caller, units: int = 1):
        self.limits, self.caller, self.units = limits, caller, units
        self.charged_at = time.time()

    async def __aenter__(self) -> _Charged:
        plan = self.caller.plan
        if not await self.limits.take_quota(self.caller.account, plan.monthly_quota, self.charged_at, self.units):
            raise QuotaExceeded()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if isinstance(exc, Exception):
            try:
                await self.limits.give_back_quota(self.caller.account, self.charged_at, self.units)
            except Exception:  # the store is down too: nothing more to do
                log.warning("could not give back a quota unit of %s", self.caller.account)
