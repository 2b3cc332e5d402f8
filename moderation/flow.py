"""The steps every moderation request takes once its body is read.

Take a quota unit, prepare the model's input (decode an image), score, decide, queue a
`review` decision. The unit is taken before any costly work, and given back to the month
it was taken from if the request then fails (invalid content or our own failure); a
client that hangs up mid-request keeps it spent, since the work was done. Route handlers
read the body; this module runs the rest and raises `moderation.errors`, never HTTP errors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from moderation.backends import ModelBackends
from moderation.errors import InvalidThreshold, ModelUnavailable, ModerationError, QuotaExceeded, ScopeNotCovered
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
    prepared: R  # the model's input (the decoded image, whose size the access log notes)
    scored: S  # the model's own answer (the image result needs its `safe` score)
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
        async with _Charged(self.limits, caller):
            prepared = await prepare()
            scored = await self._call_model(score(prepared), "model")
            decision = await self._call_model(
                self.backends.decide(scored.categories, caller.profile, kind, threshold), "policy"
            )
            review_id = None
            if decision.decision == "review":
                item = await self.reviews.create(
                    account=caller.account,
                    reason="model_flagged",
                    kind=kind,
                    reference=reference,
                    image_url=image_url,
                    scores=scored.categories,
                    model_version=scored.model_version,
                )
                review_id = item.id
        return Moderated(prepared=prepared, scored=scored, decision=decision, review_id=review_id)

    async def _call_model(self, call: Awaitable[S], what: str) -> S:
        """Await a model or policy call; a failure or a timeout is ModelUnavailable (the client may retry)."""
        try:
            return await asyncio.wait_for(call, timeout=self.inference_timeout_s)
        except ModerationError:
            raise
        except Exception as exc:  # any failure of the model side is the same retryable error
            log.warning("%s call failed: %r", what, exc)
            raise ModelUnavailable(
                "The policy service is unavailable; nothing was decided." if what == "policy" else None
            ) from exc


class _Charged:
    """Takes one quota unit on entry; gives it back when the request fails.

    Any exception gives it back: invalid content (4xx) takes no unit and our failures
    (5xx) cost the client nothing. A cancelled request (the client hung up) keeps it:
    cancellation is not an Exception, and the work was spent. The unit goes back to the
    month it was taken from, even when the request straddled a month's end.
    """

    def __init__(self, limits: Limits, caller: Caller):
        self.limits, self.caller = limits, caller
        self.charged_at = time.time()

    async def __aenter__(self) -> _Charged:
        if not await self.limits.take_quota(self.caller.account, self.caller.plan.monthly_quota, self.charged_at):
            raise QuotaExceeded()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if isinstance(exc, Exception):
            try:
                await self.limits.give_back_quota(self.caller.account, self.charged_at)
            except Exception:  # the store is down too: nothing more to do
                log.warning("could not give back a quota unit of %s", self.caller.account)
