"""Load-then-swap of model versions, shared by the model deployments.

`reconfigure()` of a deployment hands its `user_config` here. Each task names either a
version of the model registry (`text.toxic: usem3-...`) or a whole registry entry inline
(`text.toxic: {version: ..., loader: ..., weights: ..., options: ...}`), so a new model
can be deployed by editing serve_config.yaml alone. Models whose entry did not change
are reused; new ones load in a worker thread while the old set keeps serving; only a
fully loaded set replaces the old one. A failed load leaves the old set in place and
raises, so Serve reports the bad config.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from models.registry import ModelEntry, find_entry, load_model, validate_entry
from models.image_scoring import ImageScorer
from models.tasks import IMAGE_TASKS, IMAGE_TEXT_TASKS, REQUIRED_TASKS, TEXT_TASKS, category_of
from models.text_scoring import TextScorer


class ModelSet:
    """The models of one deployment, by task, with the registry entry each one came from."""

    def __init__(self, models: dict[str, Any] | None = None, entries: dict[str, ModelEntry] | None = None):
        self.models = models or {}
        self.entries = entries or {}

    @property
    def versions(self) -> dict[str, str]:
        return {task: entry.version for task, entry in self.entries.items()}

    def loaded(self, wanted: dict[str, ModelEntry]) -> ModelSet:
        """A new set serving the `wanted` entries, loading only what changed."""
        models = {
            task: self.models[task] if self.entries.get(task) == entry else load_model(entry)
            for task, entry in wanted.items()
        }
        return ModelSet(models, dict(wanted))

    async def swapped_to(self, wanted: dict[str, ModelEntry]) -> ModelSet:
        """`loaded` in a worker thread, so the old set keeps serving while the new one loads."""
        return await asyncio.to_thread(self.loaded, wanted)

    def image_scorer(self) -> ImageScorer:
        image_tasks = [task for task in self.models if task in IMAGE_TASKS]
        return ImageScorer(
            models={category_of(task): self.models[task] for task in image_tasks},
            versions={category_of(task): self.entries[task].version for task in image_tasks},
        )

    def text_reader(self):
        """The image text reader (models/image_text.py `ImageTextReader`), or None when this set has none."""
        (task,) = IMAGE_TEXT_TASKS
        return self.models.get(task)

    def text_scorer(self) -> TextScorer:
        (task,) = TEXT_TASKS
        return TextScorer(self.models[task], self.entries[task].version)


def wanted_entries(user_config: dict, tasks: tuple[str, ...], registry: Path) -> dict[str, ModelEntry]:
    """The task -> registry entry map of a deployment's `user_config: {models: {...}}`."""
    wanted = dict((user_config or {}).get("models", {}))
    unknown = set(wanted) - set(tasks)
    if unknown:
        raise ValueError(f"this deployment serves {', '.join(tasks)}; unknown tasks {sorted(unknown)}")
    missing = [task for task in tasks if task in REQUIRED_TASKS and task not in wanted]
    if missing:
        raise ValueError(f"user_config.models must name a version for {missing}")
    entries = {}
    for task, choice in wanted.items():
        if isinstance(choice, dict):
            entries[task] = validate_entry(ModelEntry(task=task, **choice))
        else:
            entries[task] = find_entry(task, str(choice), registry)
    return entries
