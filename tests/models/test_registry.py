"""The model registry: config/models.yaml entries, their validation and lookup."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from models.registry import DEFAULT_REGISTRY, LOADERS, REPO_ROOT, ModelEntry, UnknownModel, find_entry, read_registry


def write_registry(path: Path, *entries: dict) -> Path:
    path.write_text(yaml.safe_dump({"models": list(entries)}))
    return path


def entry(**fields) -> dict:
    return {"task": "image.nsfw", "version": "v1", "loader": "open_nsfw_onnx", "weights": None, **fields}


def test_unknown_task_is_rejected(tmp_path: Path) -> None:
    registry = write_registry(tmp_path / "models.yaml", entry(task="image.gore"))

    with pytest.raises(ValueError, match="unknown task 'image.gore'"):
        read_registry(registry)


def test_unknown_loader_is_rejected(tmp_path: Path) -> None:
    registry = write_registry(tmp_path / "models.yaml", entry(loader="pickle_file"))

    with pytest.raises(ValueError, match="unknown loader 'pickle_file'"):
        read_registry(registry)


def test_relative_weights_resolve_against_the_repo_root() -> None:
    assert ModelEntry("text.toxic", "v1", "transformers_text", "weights/bert").weights_path() == str(
        REPO_ROOT / "weights" / "bert"
    )


def test_absolute_weights_are_kept_and_missing_weights_stay_missing(tmp_path: Path) -> None:
    assert ModelEntry("text.toxic", "v1", "transformers_text", str(tmp_path)).weights_path() == str(tmp_path)
    assert ModelEntry("image.nsfw", "v1", "open_nsfw_onnx").weights_path() is None


def test_find_entry_picks_the_task_and_version(tmp_path: Path) -> None:
    registry = write_registry(
        tmp_path / "models.yaml",
        entry(version="v1"),
        entry(version="v2", options={"max_batch": 4}),
        entry(task="image.weapon", version="v2", loader="efficientnet_lite0_weapon"),
    )

    found = find_entry("image.nsfw", "v2", registry)

    assert (found.task, found.version, found.options) == ("image.nsfw", "v2", {"max_batch": 4})


def test_find_entry_of_an_unknown_version_raises_unknown_model(tmp_path: Path) -> None:
    registry = write_registry(tmp_path / "models.yaml", entry(version="v1"))

    with pytest.raises(UnknownModel, match="image.nsfw=v3"):
        find_entry("image.nsfw", "v3", registry)


def test_committed_registry_parses_and_names_only_known_loaders() -> None:
    entries = read_registry(DEFAULT_REGISTRY)

    assert entries
    for model in entries:
        module_name = LOADERS[model.loader].partition(":")[0]
        assert importlib.util.find_spec(module_name) is not None, f"{model.version}: no module {module_name}"
