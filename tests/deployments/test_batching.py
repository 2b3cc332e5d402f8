"""Batch size and wait from user_config: validated, and set on the running replica's batch queue."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from deployments import image_model, text_model
from deployments.batching import BatchSettings
from models.batch_queue import BatchQueue
from runtime.settings import PROJECT_ROOT

DEFAULT = BatchSettings(max_batch_size=8, batch_wait_timeout_s=0.001)


def test_left_out_the_defaults_apply():
    assert BatchSettings.from_user_config({"models": {}}, DEFAULT) == DEFAULT
    assert BatchSettings.from_user_config(None, DEFAULT) == DEFAULT


def test_user_config_overrides_both():
    settings = BatchSettings.from_user_config({"max_batch_size": 4, "batch_wait_timeout_s": 0.02}, DEFAULT, 16)
    assert settings == BatchSettings(max_batch_size=4, batch_wait_timeout_s=0.02)
    assert BatchSettings.from_user_config({"batch_wait_timeout_s": 0}, DEFAULT).batch_wait_timeout_s == 0.0


@pytest.mark.parametrize(
    "user_config",
    [
        {"max_batch_size": 0},
        {"max_batch_size": -1},
        {"max_batch_size": 257},
        {"max_batch_size": 4.5},
        {"max_batch_size": "8"},
        {"max_batch_size": True},
        {"batch_wait_timeout_s": -0.1},
        {"batch_wait_timeout_s": 2},
        {"batch_wait_timeout_s": float("nan")},
        {"batch_wait_timeout_s": "fast"},
    ],
)
def test_nonsense_is_refused(user_config):
    with pytest.raises(ValueError, match="user_config"):
        BatchSettings.from_user_config(user_config, DEFAULT)


def test_a_batch_above_max_ongoing_requests_is_refused():
    with pytest.raises(ValueError, match="max_ongoing_requests"):
        BatchSettings.from_user_config({"max_batch_size": 32}, DEFAULT, max_ongoing_requests=16)
    assert BatchSettings.from_user_config({"max_batch_size": 16}, DEFAULT, 16).max_batch_size == 16


class _Batched:
    """A batch queue like the model deployments', recording the batches it runs."""

    def __init__(self):
        self.batches: list[int] = []
        self.queue = BatchQueue(self.score, max_batch_size=8, batch_wait_timeout_s=0.0)

    async def score(self, items: list[int]) -> list[int]:
        self.batches.append(len(items))
        await asyncio.sleep(0.01)  # a model's run: what arrives meanwhile waits for the next batch
        return items


@pytest.mark.anyio
async def test_apply_to_changes_the_batches_that_form():
    batched = _Batched()
    BatchSettings(max_batch_size=2, batch_wait_timeout_s=0.05).apply_to(batched.queue)
    assert (batched.queue.max_batch_size, batched.queue.batch_wait_timeout_s) == (2, 0.05)
    assert await asyncio.gather(*(batched.queue.submit(i) for i in range(6))) == list(range(6))
    assert batched.batches == [2, 2, 2]

    BatchSettings(max_batch_size=6, batch_wait_timeout_s=0.05).apply_to(batched.queue)
    batched.batches.clear()
    await asyncio.gather(*(batched.queue.submit(i) for i in range(6)))
    assert batched.batches == [6]  # one batch: the wait lets all six join


def _deployments(path=PROJECT_ROOT / "serve_config.yaml") -> dict[str, dict]:
    config = yaml.safe_load(path.read_text())
    return {entry["name"]: entry for entry in config["applications"][0]["deployments"]}


@pytest.mark.parametrize("name, module", [("ImageModel", image_model), ("TextModel", text_model)])
def test_serve_config_batching_is_valid_for_its_deployment(name, module):
    entry = _deployments()[name]
    settings = BatchSettings.from_user_config(entry["user_config"], module.DEFAULT_BATCHING, entry["max_ongoing_requests"])
    # Named explicitly, so that an operator sees what to tune.
    assert {"max_batch_size", "batch_wait_timeout_s"} <= set(entry["user_config"])
    assert settings.max_batch_size >= 8
