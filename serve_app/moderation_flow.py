"""The steps every moderation request shares once its input is valid.

Take a quota unit, score, decide, queue a `review` decision, and give the unit back if
the request ends in a 5xx. The route handlers parse and validate; this runs the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from policy.decisions import Decision
from policy.types import ContentKind
from serve_app.auth import Caller
from serve_app.errors import ApiError, InferenceUnavailable, InvalidThreshold, QuotaExceeded
from serve_app.services import Services

log = logging.getLogger("moderation.flow")
T = TypeVar("T")


@dataclass(frozen=True)
class Moderated:
    scores: dict[str, float]
    model_version: str
    decision: Decision
    review_id: int | None


def parse_threshold(raw: str | None) -> float | None:
    """The `?threshold=` override: a number in [0, 1], else 400 invalid_threshold."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InvalidThreshold() from None
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise InvalidThreshold()
    return value


async def score_with_model(svc: Services, call: Awaitable[T]) -> T:
    """Await a model call; a failure or a timeout is a 503 the client can retry."""
    try:
        return await asyncio.wait_for(call, timeout=svc.inference_timeout_s)
    except ApiError:
        raise
    except Exception as exc:  # any failure of the model side is the same 503 to the client
        log.warning("model call failed: %r", exc)
        raise InferenceUnavailable() from exc


class ChargedRequest:
    """Takes one quota unit on entry; gives it back when the request ends in a 5xx."""

    def __init__(self, svc: Services, caller: Caller):
        self.svc, self.caller = svc, caller

    async def __aenter__(self) -> ChargedRequest:
        if not await self.svc.limits.take_quota(self.caller.account, self.caller.plan.monthly_quota):
            raise QuotaExceeded()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        failed_on_our_side = exc is not None and (
            not isinstance(exc, ApiError) or exc.status >= 500
        )
        if failed_on_our_side:
            try:
                await self.svc.limits.give_back_quota(self.caller.account)
            except Exception:  # the store is down too: nothing more to do
                log.warning("could not give back a quota unit of %s", self.caller.account)


async def moderate(
    svc: Services,
    caller: Caller,
    *,
    kind: ContentKind,
    score: Callable[[], Awaitable[Any]],
    threshold: float | None,
    reference: str | None,
    image_url: str | None,
) -> tuple[Any, Moderated]:
    """Charge a unit, run `score()` (a model call returning `.categories` and `.model_version`), decide, queue.

    Returns the model's own result too (the image result needs its `safe` score).
    """
    async with ChargedRequest(svc, caller):
        scored = await score_with_model(svc, score())
        outcome = await _decide_and_queue(
            svc, caller, kind=kind, scores=scored.categories, model_version=scored.model_version,
            threshold=threshold, reference=reference, image_url=image_url,
        )
    return scored, outcome


async def _decide_and_queue(
    svc: Services,
    caller: Caller,
    *,
    kind: ContentKind,
    scores: dict[str, float],
    model_version: str,
    threshold: float | None,
    reference: str | None,
    image_url: str | None,
) -> Moderated:
    try:
        decision = await svc.backends.decide(scores, caller.profile, kind, threshold)
    except ApiError:
        raise
    except Exception as exc:
        log.warning("policy call failed: %r", exc)
        raise InferenceUnavailable("The policy service is unavailable; nothing was decided.") from exc
    review_id = None
    if decision.decision == "review":
        item = await svc.reviews.create(
            account=caller.account,
            reason="model_flagged",
            kind=kind,
            reference=reference,
            image_url=image_url,
            scores=scores,
            model_version=model_version,
        )
        review_id = item.id
    return Moderated(scores=scores, model_version=model_version, decision=decision, review_id=review_id)
