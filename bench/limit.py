"""The raw limit of this machine: the models called in-process, batched, from N processes of one thread each.

N = 1 gives the one-thread figure; N = the number of cores gives the limit the service is held to. Each process loads
the models as the deployments do (registry + ImageScorer/TextScorer), gets the inputs already decoded, warms up, then
all processes start each workload together (a barrier) and score batches of BATCH until the time is up. Nothing goes
through HTTP, Redis or Ray. An image workload's `with_decoding` twin is the same with each process decoding the bench
JPEGs first (`decode_image`, as the ImageModel replica does before it scores): the limit for images, decode included.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
import traceback
from dataclasses import dataclass
from typing import Any

BATCH = 8
MAX_PIXELS = 40_000_000  # a plan's largest image, as the service's decode_image call allows
CATEGORIES = {"image_default": ("nsfw",), "image_strict": ("nsfw", "weapon", "violence")}
WITH_DECODING = "_with_decoding"  # the suffix of an image workload whose inputs are the JPEGs, decoded in the loop
# The opt-in EmbeddingGemma blend (docs/text-model.md), measured beside the served text model where `make gemma` ran:
# raw limit only, since the graph serves the default.
GEMMA_BLEND = "text_gemma_blend"
START_TIMEOUT_S = 300
FAILED = "failed"  # the key of a worker's report when it could not measure (its traceback)


@dataclass(frozen=True)
class Limit:
    """One workload over N processes: items per second at batch BATCH, and one item's seconds alone (median)."""

    processes: int
    items_per_s: float
    batch1_s: float


def with_decoding(workload: str) -> str:
    return workload + WITH_DECODING


def served_workload(name: str) -> str:
    """The workload the service is measured on that a raw-limit workload stands for ("image_default" for both)."""
    return name.removesuffix(WITH_DECODING)


def measure(processes: int, workloads: list[str], versions: dict[str, str], env: dict[str, str],
            seconds: float) -> dict[str, Limit]:
    """Items/s of every workload ("image_default", "image_strict", their `with_decoding` twins, "text") with
    `processes` processes at once."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(target=_worker, args=(workloads, versions, env, seconds, barrier, results), daemon=True)
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        reports = [results.get(timeout=START_TIMEOUT_S + seconds * len(workloads)) for _ in workers]
        failed = [report[FAILED] for report in reports if FAILED in report]
        if failed:
            raise RuntimeError(f"a raw-limit worker failed:\n{failed[0]}")
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.terminate()
    return {
        name: Limit(
            processes,
            sum(report[name][0] for report in reports) / max(report[name][1] for report in reports),
            statistics.median(report[name][2] for report in reports),
        )
        for name in workloads
    }


def _worker(workloads, versions, env, seconds, barrier, results) -> None:
    try:
        _measure_in_worker(workloads, versions, env, seconds, barrier, results)
    except BaseException:  # a model that fails to load: say why at once, not after the start timeout
        barrier.abort()
        results.put({FAILED: traceback.format_exc()})


def _measure_in_worker(workloads, versions, env, seconds, barrier, results) -> None:
    os.environ.update(env)  # before numpy/torch load: their thread pools read it once
    import torch

    torch.set_num_threads(1)
    score, inputs = _scorers(workloads, versions)
    report = {}
    for name in workloads:
        batch = inputs[name][:BATCH]
        score[name](batch)  # warm-up: lazy initialisation and first-call allocations
        alone = [_seconds(score[name], [item]) for item in inputs[name]]
        barrier.wait(timeout=START_TIMEOUT_S)
        items, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            score[name](batch)
            items += len(batch)
        report[name] = (items, time.perf_counter() - start, statistics.median(alone))
    results.put(report)


def _scorers(workloads: list[str], versions: dict[str, str]) -> tuple[dict[str, Any], dict[str, list]]:
    from bench.inputs import TEXTS, photo_jpegs
    from models.image_decoding import decode_image
    from models.image_scoring import ImageRequest
    from models.model_set import ModelSet, wanted_entries
    from models.registry import DEFAULT_REGISTRY
    from models.tasks import IMAGE_TASKS, TEXT_TASKS
    from models.text_scoring import TextRequest

    score, inputs = {}, {}
    image_workloads = [name for name in workloads if served_workload(name) in CATEGORIES]
    if image_workloads:
        image_versions = {task: v for task, v in versions.items() if task in IMAGE_TASKS}
        scorer = ModelSet().loaded(wanted_entries({"models": image_versions}, IMAGE_TASKS, DEFAULT_REGISTRY)).image_scorer()
        jpegs = photo_jpegs()
        frames = [decode_image(jpeg, MAX_PIXELS).frames for jpeg in jpegs]
        for name in image_workloads:
            categories = CATEGORIES[served_workload(name)]
            if name in CATEGORIES:
                score[name] = scorer.score
                inputs[name] = [ImageRequest(f, categories) for f in frames]
            else:
                score[name] = lambda batch, c=categories: scorer.score(
                    [ImageRequest(decode_image(jpeg, MAX_PIXELS).frames, c) for jpeg in batch])
                inputs[name] = jpegs
    text_workloads = {"text": {task: v for task, v in versions.items() if task in TEXT_TASKS}}
    if GEMMA_BLEND in workloads:
        text_workloads[GEMMA_BLEND] = {"text.toxic": gemma_blend_version()}
    for name, text_versions in text_workloads.items():
        if name in workloads:
            models = ModelSet().loaded(wanted_entries({"models": text_versions}, TEXT_TASKS, DEFAULT_REGISTRY))
            score[name] = models.text_scorer().score
            inputs[name] = [TextRequest(text, ("toxic",)) for text in TEXTS]
    return score, inputs


def gemma_blend_version() -> str:
    from models.registry import read_registry

    (version,) = [entry.version for entry in read_registry() if entry.loader == "use_gemma_blend"]
    return version


def _seconds(call, batch: list) -> float:
    start = time.perf_counter()
    call(batch)
    return time.perf_counter() - start


def decode_seconds() -> float:
    """Median seconds to decode one bench photo to frames, as the ImageModel replica does before scoring."""
    from bench.inputs import photo_jpegs
    from models.image_decoding import decode_image

    jpegs = photo_jpegs()
    decode_image(jpegs[0], MAX_PIXELS)
    return statistics.median(_seconds(lambda j: decode_image(j[0], MAX_PIXELS), [jpeg]) for jpeg in jpegs * 3)
