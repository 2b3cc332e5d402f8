"""What the two model deployments (ImageModel, TextModel) share: their models come from the registry through
`ModelSet`, `reconfigure` loads a new version before it replaces the old one (requests in flight keep theirs) and
applies the batch settings of `user_config`, and `model_versions` says what is served."""

from __future__ import annotations

from pathlib import Path

from deployments.batching import BatchSettings, replica_max_ongoing_requests
from deployments.threads import limit_compute_threads
from models.model_set import ModelSet, wanted_entries


class ModelShell:
    """A base of a Ray Serve model deployment. A subclass names its `tasks` and `default_batching`, builds its scorer
    from the loaded models (`scorer_of`), and has one `@serve.batch` method, `_score_batch`."""

    tasks: tuple[str, ...]
    # serve_config.yaml's user_config (max_batch_size, batch_wait_timeout_s) overrides these at run time
    # (deployments/batching.py), never above max_ongoing_requests, or batches would be capped. The wait is short:
    # under load batches fill from the queue anyway, and an idle request should not wait.
    default_batching: BatchSettings

    def __init__(self, model_registry: str):
        limit_compute_threads()
        self._registry = Path(model_registry)
        self._models = ModelSet()
        self._scorer = None

    def scorer_of(self, models: ModelSet):
        raise NotImplementedError

    async def reconfigure(self, user_config: dict) -> None:
        # Checked first: a bad batch setting changes nothing, the models included.
        batching = BatchSettings.from_user_config(user_config, self.default_batching, replica_max_ongoing_requests())
        models = await self._models.swapped_to(wanted_entries(user_config, self.tasks, self._registry))
        # One assignment: a batch in flight keeps the scorer it started with.
        self._models, self._scorer = models, self.scorer_of(models)
        batching.apply_to(self._score_batch)

    def model_versions(self) -> dict[str, str]:
        if self._scorer is None:
            raise RuntimeError("no model loaded yet")
        return dict(self._models.versions)
