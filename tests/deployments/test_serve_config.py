"""serve_config.yaml's resource rules: the graph fits on 2 cores; batches are not capped."""

from __future__ import annotations

import yaml

from deployments import gemma_model, image_model, image_text_model, text_model
from runtime.settings import PROJECT_ROOT

MACHINE_CPUS = 2


def deployments() -> dict[str, dict]:
    config = yaml.safe_load((PROJECT_ROOT / "serve_config.yaml").read_text())
    return {entry["name"]: entry for entry in config["applications"][0]["deployments"]}


def test_the_whole_graph_fits_on_two_cores_at_max_replicas():
    total = 0.0
    for entry in deployments().values():
        replicas = entry.get("autoscaling_config", {}).get("max_replicas", entry.get("num_replicas", 1))
        total += replicas * entry["ray_actor_options"]["num_cpus"]
    assert total <= MACHINE_CPUS


def test_max_ongoing_requests_is_not_below_the_batch_size():
    graph = deployments()
    assert graph["ImageModel"]["max_ongoing_requests"] >= image_model.MAX_BATCH_SIZE >= 8
    assert graph["TextModel"]["max_ongoing_requests"] >= text_model.MAX_BATCH_SIZE >= 8
    assert graph["GemmaModel"]["max_ongoing_requests"] >= gemma_model.MAX_BATCH_SIZE >= 8
    assert graph["ImageTextModel"]["max_ongoing_requests"] >= image_text_model.DEFAULT_BATCHING.max_batch_size
    for name in ("ImageModel", "ImageTextModel", "TextModel", "GemmaModel"):
        assert graph[name]["max_ongoing_requests"] >= graph[name]["user_config"]["max_batch_size"]


def test_model_deployments_autoscale():
    for name in ("ImageModel", "ImageTextModel", "TextModel", "GemmaModel"):
        scaling = deployments()[name]["autoscaling_config"]
        assert scaling["max_replicas"] > scaling["min_replicas"] >= 1



def test_the_second_stage_is_sent_more_calls_than_its_fair_queue_holds_plus_a_batch():
    """Ray queues a replica's calls past max_ongoing_requests in its own FIFO, in front of the fair queue: for the
    fair queue to decide who waits (models/fair_batch_queue.py), every call that could wait must reach it."""
    gemma = deployments()["GemmaModel"]
    batch = gemma["user_config"]["max_batch_size"]
    assert gemma["max_ongoing_requests"] > gemma_model.QUEUE_CAPACITY + batch
    assert gemma_model.GemmaModel.func_or_class.new_batch_queue is not text_model.TextModel.func_or_class.new_batch_queue
