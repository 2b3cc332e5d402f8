"""The raw models in this process, one compute thread each, as the deployments load them (registry + ImageScorer).

Latency is per item: a call with one item (batch 1), and a call with eight divided by eight (batch 8). Memory is
measured in a fresh interpreter (`python -m bench.raw GROUP`), so that nothing else this run loads is counted.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench.inputs import long_text, photo_jpegs
from bench.memory import rss_mib

ALL_CATEGORIES = ("nsfw", "weapon", "violence")
NSFW_ONLY = ("nsfw",)
BATCH = 8
# A plan's largest image: what the service's decode_image call allows.
MAX_PIXELS = 40_000_000
MEMORY_GROUPS = ("image", "text", "all")
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ItemTiming:
    batch1_s: float  # median seconds for one item alone
    batch8_s: float | None = None  # median seconds per item in a call of eight

    @property
    def batch8_items_per_s(self) -> float:
        return 1.0 / self.batch8_s


class RawModels:
    """The served versions (task -> version, as in serve_config.yaml) loaded from the registry."""

    def __init__(self, versions: dict[str, str], categories: tuple[str, ...] = ALL_CATEGORIES, text: bool = True):
        from models.image_scoring import ImageScorer
        from models.registry import find_entry, load_model

        image_versions = {c: versions[f"image.{c}"] for c in categories}
        models = {c: load_model(find_entry(f"image.{c}", v)) for c, v in image_versions.items()}
        self.image = ImageScorer(models=models, versions=image_versions) if categories else None
        self.text = load_model(find_entry("text.toxic", versions["text.toxic"])) if text else None

    def score_images(self, frames: list[list[Any]], categories: tuple[str, ...]) -> list[Any]:
        from models.image_scoring import ImageRequest

        return self.image.score([ImageRequest(f, categories) for f in frames])

    def score_texts(self, texts: list[str]) -> list[dict[str, float]]:
        return self.text.predict(texts)


def decoded_photos() -> list[list[Any]]:
    from models.image_decoding import decode_image

    return [decode_image(jpeg, MAX_PIXELS).frames for jpeg in photo_jpegs()]


def time_items(score: Callable[[list], Any], items: list, rounds: int) -> ItemTiming:
    """Median per-item seconds at batch 1 (every item, `rounds` times) and batch 8 (all items, `rounds` times)."""
    score(items[:BATCH])  # warm-up: lazy initialisation and first-call allocations
    single = [_seconds(score, [item]) for _ in range(rounds) for item in items]
    batched = [_seconds(score, items[:BATCH]) / BATCH for _ in range(rounds)]
    return ItemTiming(statistics.median(single), statistics.median(batched))


def time_one(score: Callable[[list], Any], item: Any, rounds: int) -> ItemTiming:
    """Median seconds of one item alone, for items too slow to batch here (the 20,000-character text)."""
    score([item])
    return ItemTiming(statistics.median(_seconds(score, [item]) for _ in range(rounds)))


def faster(first: ItemTiming, second: ItemTiming) -> ItemTiming:
    batch8 = [t.batch8_s for t in (first, second) if t.batch8_s is not None]
    return ItemTiming(min(first.batch1_s, second.batch1_s), min(batch8) if batch8 else None)


def _seconds(call: Callable[[list], Any], batch: list) -> float:
    start = time.perf_counter()
    call(batch)
    return time.perf_counter() - start


def decode_seconds(rounds: int) -> float:
    """Median seconds to decode one photo to frames, as the ingress does before scoring."""
    from models.image_decoding import decode_image

    def decode(jpegs: list[bytes]) -> list[Any]:
        return [decode_image(jpeg, MAX_PIXELS) for jpeg in jpegs]

    return time_items(decode, photo_jpegs(), rounds).batch1_s


def memory_growth_mib(group: str, versions: dict[str, str]) -> dict[str, float]:
    """RSS of a fresh interpreter before and after loading `group` and scoring the bench inputs with it."""
    result = subprocess.run(
        [sys.executable, "-m", "bench.raw", group, json.dumps(versions)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _measure_memory_here(group: str, versions: dict[str, str]) -> dict[str, float]:
    from bench.inputs import TEXTS

    before = rss_mib()
    models = RawModels(versions, categories=() if group == "text" else ALL_CATEGORIES, text=group != "image")
    if models.image is not None:
        models.score_images(decoded_photos(), ALL_CATEGORIES)
    if models.text is not None:
        models.score_texts([*TEXTS, long_text()])
    after = rss_mib()
    return {"before_mib": before, "after_mib": after, "growth_mib": after - before}


if __name__ == "__main__":
    print(json.dumps(_measure_memory_here(sys.argv[1], json.loads(sys.argv[2]))))
