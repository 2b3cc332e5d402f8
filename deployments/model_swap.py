"""Load-then-swap of model versions, shared by the model deployments (no Ray here).

`reconfigure()` of a deployment hands its `user_config` here. Models whose version did
not change are reused; new ones load in a worker thread while the old set keeps
serving; only a fully loaded set replaces the old one. A failed load leaves the old
set in place and raises, so Serve reports the bad config.
"""

from __future__ import annotations

import asyncio
from typing import Any

from models.registry import find_entry, load_model
from serve_app.settings import get_settings


class ModelSet:
    """The models of one deployment, by task, with the version each one reports."""

    def __init__(self, models: dict[str, Any] | None = None, versions: dict[str, str] | None = None):
        self.models = models or {}
        self.versions = versions or {}

    async def swapped_to(self, wanted: dict[str, str]) -> ModelSet:
        """A new set with the `wanted` versions (task -> version), loading only what changed."""

        registry = get_settings().model_registry

        def load_changed() -> ModelSet:
            models, versions = {}, {}
            for task, version in wanted.items():
                if self.versions.get(task) == version:
                    models[task] = self.models[task]
                else:
                    models[task] = load_model(find_entry(task, version, registry))
                versions[task] = version
            return ModelSet(models, versions)

        return await asyncio.to_thread(load_changed)


def wanted_versions(user_config: dict, tasks: tuple[str, ...]) -> dict[str, str]:
    """The task -> version map of a deployment's `user_config: {models: {...}}`."""
    versions = dict((user_config or {}).get("models", {}))
    unknown = set(versions) - set(tasks)
    if unknown:
        raise ValueError(f"this deployment serves {', '.join(tasks)}; unknown tasks {sorted(unknown)}")
    missing = [task for task in tasks if task not in versions and task.endswith(("nsfw", "toxic"))]
    if missing:
        raise ValueError(f"user_config.models must name a version for {missing}")
    return versions
