"""Load-then-swap of model versions (models/model_set.py), without Ray."""

from __future__ import annotations

import pytest

from models import model_set
from models.model_set import ModelSet, wanted_entries
from models.registry import DEFAULT_REGISTRY, ModelEntry, UnknownModel

pytestmark = pytest.mark.anyio

TASKS = ("image.nsfw", "image.weapon", "image.violence")


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """Counts real loads; each 'model' is just its version (a fake inside this unit test)."""
    loaded: list[str] = []

    def fake_load(entry: ModelEntry) -> str:
        if entry.version == "broken":
            raise OSError("weights missing")
        loaded.append(entry.version)
        return f"model:{entry.version}"

    monkeypatch.setattr(model_set, "load_model", fake_load)
    return loaded


def entry(task: str, version: str) -> ModelEntry:
    return ModelEntry(task=task, version=version, loader="open_nsfw_onnx")


async def test_a_swap_loads_only_the_models_whose_entry_changed(loads):
    first = await ModelSet().swapped_to({"image.nsfw": entry("image.nsfw", "a"), "image.weapon": entry("image.weapon", "w")})
    second = await first.swapped_to({"image.nsfw": entry("image.nsfw", "b"), "image.weapon": entry("image.weapon", "w")})
    assert loads == ["a", "w", "b"]
    assert second.models == {"image.nsfw": "model:b", "image.weapon": "model:w"}
    assert second.versions == {"image.nsfw": "b", "image.weapon": "w"}


async def test_a_failed_load_leaves_the_serving_set_untouched(loads):
    serving = await ModelSet().swapped_to({"image.nsfw": entry("image.nsfw", "a")})
    with pytest.raises(OSError):
        await serving.swapped_to({"image.nsfw": entry("image.nsfw", "broken")})
    assert serving.models == {"image.nsfw": "model:a"}


def test_user_config_names_registry_versions():
    wanted = wanted_entries({"models": {"image.nsfw": "open-nsfw-1.0"}}, TASKS, DEFAULT_REGISTRY)
    assert wanted["image.nsfw"].loader == "open_nsfw_onnx"


def test_user_config_may_give_a_whole_entry_inline():
    inline = {"version": "my-vit-2", "loader": "transformers_image", "weights": "/models/vit", "options": {"labels": {"nsfw": ["nsfw"]}}}
    wanted = wanted_entries({"models": {"image.nsfw": inline}}, TASKS, DEFAULT_REGISTRY)
    assert wanted["image.nsfw"] == ModelEntry(task="image.nsfw", **inline)


@pytest.mark.parametrize(
    ("user_config", "error"),
    [
        ({"models": {"image.nsfw": "no-such-version"}}, UnknownModel),
        ({"models": {"text.toxic": "x", "image.nsfw": "open-nsfw-1.0"}}, ValueError),
        ({"models": {"image.weapon": "effnet-lite0-1.0"}}, ValueError),
        ({"models": {"image.nsfw": {"version": "v", "loader": "pickle_from_the_internet"}}}, ValueError),
    ],
)
def test_a_bad_user_config_is_refused(user_config, error):
    with pytest.raises(error):
        wanted_entries(user_config, TASKS, DEFAULT_REGISTRY)


def test_every_version_in_serve_config_is_in_the_registry():
    import yaml

    from runtime.settings import PROJECT_ROOT

    config = yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())
    for deployment in config["applications"][0]["deployments"]:
        models = deployment.get("user_config", {}).get("models")
        if models:
            tasks = tuple(models)
            assert set(wanted_entries({"models": models}, tasks, DEFAULT_REGISTRY)) == set(tasks)
