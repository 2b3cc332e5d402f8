"""What the two model deployments (ImageModel, TextModel) share: their models come from the registry through
`ModelSet`, requests are batched across callers by one `BatchQueue` (models/batch_queue.py: the next batch forms when
the model is free, not before), `reconfigure` loads a new version before it replaces the old one (requests in flight
keep theirs) and applies the batch settings of `user_config`, and `model_versions` says what is served."""

from __future__ import annotations

from pathlib import Path

from deployments.batching import BatchSettings, replica_max_ongoing_requests
from deployments.threads import limit_compute_threads
from models.batch_isolation import raised_if_failed
from models.batch_queue import BatchQueue
from models.model_set import ModelSet, wanted_entries


class ModelShell:
    """A base of a Ray Serve model deployment. A subclass names its `tasks` and `default_batching`, builds its scorer
    from the loaded models (`scorer_of`), and scores a batch of other callers' items in `_score_batch`, answering per
    item its result or its own error as a value (models/batch_isolation.py); `_batched(item)` queues one item."""

    tasks: tuple[str, ...]
    # serve_config.yaml's user_config (max_batch_size, batch_wait_timeout_s) overrides these at run time
    # (deployments/batching.py), never above max_ongoing_requests, or batches would be capped. The wait is 0: under
    # load a batch fills from the requests that arrived while the last one ran, and an idle request should not wait.
    default_batching: BatchSettings

    def __init__(self, model_registry: str):
        limit_compute_threads()
        self._registry = Path(model_registry)
        self._models = ModelSet()
        self._scorer = None
        self._batches = self.new_batch_queue()

    def new_batch_queue(self) -> BatchQueue:
        """The queue its items wait in (a subclass may order them otherwise: deployments/gemma_model.py)."""
        return BatchQueue(
            self._score_batch, self.default_batching.max_batch_size, self.default_batching.batch_wait_timeout_s
        )

    def scorer_of(self, models: ModelSet):
        raise NotImplementedError

    async def _score_batch(self, items: list) -> list:
        raise NotImplementedError

    async def _batched(self, item):
        """`item` scored in a batch with other callers' items; its own failure is raised for it alone."""
        return raised_if_failed(await self._batches.submit(item))

    async def reconfigure(self, user_config: dict) -> None:
        # Checked first: a bad batch setting changes nothing, the models included.
        batching = BatchSettings.from_user_config(user_config, self.default_batching, replica_max_ongoing_requests())
        models = await self._models.swapped_to(wanted_entries(user_config, self.tasks, self._registry))
        # One assignment: a batch in flight keeps the scorer it started with.
        self._models, self._scorer = models, self.scorer_of(models)
        batching.apply_to(self._batches)

    def model_versions(self) -> dict[str, str]:
        if self._scorer is None:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)
