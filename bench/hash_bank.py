"""The hash bank's match as banks grow (1k, 100k, 1M hashes), its memory, and PDQ's robustness on the bench photos.

    python -m bench.hash_bank        # about 30 s; `make bench` runs it too and puts its tables in docs/benchmarks.md

Matching: `moderation.hash_matching.PackedBank.nearest` (a brute-force XOR + popcount scan of packed uint64 words) on banks of
random 256-bit hashes, median of `QUERIES` queries, one thread (as in a replica). Memory: the replica's arrays per
million hashes, and the store's bytes per hash (a bank of `STORE_SAMPLE` written to a scratch embedded store, its
used memory before and after). Robustness: every bench photo (scikit-image) as a 90% JPEG against edits of it, the
distance between their PDQ hashes and whether it is within the match distance.
"""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from bench.inputs import PHOTOS, photo_jpegs
from models.pdq import hamming_distance, pdq_of_image
from moderation.hash_matching import HashBankRules, PackedBank
from store.hash_bank.bank import BankEntry

BANK_SIZES = (1_000, 100_000, 1_000_000)
QUERIES = 50
STORE_SAMPLE = 100_000
MIB = 1024 * 1024


@dataclass
class HashBankResults:
    match_ms: dict[int, float] = field(default_factory=dict)  # bank size -> median ms per query
    replica_bytes_per_million: int = 0
    store_bytes_per_hash: float = 0.0
    pdq_ms: float = 0.0  # hashing one 512 px photo
    robustness: dict[str, list[int]] = field(default_factory=dict)  # edit -> distance per photo


def _random_hashes(count: int, rng: np.random.Generator) -> list[str]:
    return [row.tobytes().hex() for row in rng.integers(0, 256, size=(count, 32), dtype=np.uint8)]


def measure_matching(results: HashBankResults, rng: np.random.Generator) -> None:
    for size in BANK_SIZES:
        bank = PackedBank([BankEntry(h, i, 0.0) for i, h in enumerate(_random_hashes(size, rng))])
        queries = _random_hashes(QUERIES, rng)
        times = []
        for query in queries:
            started = time.perf_counter()
            bank.nearest(query, HashBankRules.match_distance)
            times.append((time.perf_counter() - started) * 1000)
        results.match_ms[size] = statistics.median(times)
        if size == 1_000_000:
            results.replica_bytes_per_million = bank.nbytes


def measure_store(results: HashBankResults, rng: np.random.Generator) -> None:
    import asyncio

    import redis
    import redis.asyncio

    from store.hash_bank.bank import HashBank
    from runtime.embedded_store import EmbeddedStore

    with tempfile.TemporaryDirectory(prefix="bench-bank-") as workdir, EmbeddedStore(Path(workdir)) as store:
        owner = redis.Redis.from_url(store.admin_url)
        before = owner.info("memory")["used_memory"]

        async def fill() -> None:
            client = redis.asyncio.Redis.from_url(store.url, decode_responses=True)
            hashes = _random_hashes(STORE_SAMPLE, rng)
            await HashBank(client).add_many("bench", [(h, i) for i, h in enumerate(hashes)])
            await client.aclose()

        asyncio.run(fill())
        results.store_bytes_per_hash = (owner.info("memory")["used_memory"] - before) / STORE_SAMPLE
        owner.close()


EDITS = {
    "recompressed (JPEG 50)": lambda im: _jpeg_roundtrip(im, 50),
    "resized to 50%": lambda im: im.resize((im.width // 2, im.height // 2), Image.Resampling.BICUBIC),
    "resized to 50% + JPEG 60": lambda im: _jpeg_roundtrip(im.resize((im.width // 2, im.height // 2)), 60),
    "cropped 5% each side": lambda im: _crop(im, 0.05),
    "cropped 10% each side": lambda im: _crop(im, 0.10),
    "mirrored (matched through the mirrored hash)": ImageOps.mirror,
    "rotated 90 degrees": lambda im: im.rotate(90, expand=True),
    "grayscale": lambda im: ImageOps.grayscale(im).convert("RGB"),
}


def _jpeg_roundtrip(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def _crop(image: Image.Image, share: float) -> Image.Image:
    dx, dy = int(image.width * share), int(image.height * share)
    return image.crop((dx, dy, image.width - dx, image.height - dy))


def measure_robustness(results: HashBankResults) -> None:
    originals = [Image.open(io.BytesIO(jpeg)).convert("RGB") for jpeg in photo_jpegs()]
    hashes = [pdq_of_image(image) for image in originals]
    frames = [image.copy() for image in originals]
    for frame in frames:
        frame.thumbnail((512, 512))  # as the ImageModel's decoder hands frames over (models/image_decoding.py)
    started = time.perf_counter()
    for frame in frames:
        pdq_of_image(frame)
    results.pdq_ms = (time.perf_counter() - started) * 1000 / len(frames)
    for name, edit in EDITS.items():
        edited = [pdq_of_image(edit(image)) for image in originals]
        results.robustness[name] = [
            min(hamming_distance(original.hash, e.hash), hamming_distance(original.hash, e.mirrored))
            for original, e in zip(hashes, edited)
        ]


def measure() -> HashBankResults:
    rng = np.random.default_rng(0)
    results = HashBankResults()
    measure_matching(results, rng)
    measure_store(results, rng)
    measure_robustness(results)
    return results


def section(results: HashBankResults) -> list[str]:
    """The `## Hash bank` section of docs/benchmarks.md."""
    rules = HashBankRules()
    lines = [
        "## Hash bank",
        "",
        "`bench/hash_bank.py`: a brute-force scan (XOR and popcount over four uint64 words a hash, numpy, one thread) "
        f"for the nearest banked PDQ hash, median of {QUERIES} queries; the bank is random 256-bit hashes.",
        "",
        "| hashes in the bank | ms per match |",
        "|---|---|",
        *[f"| {size:,} | {ms:.2f} |" for size, ms in results.match_ms.items()],
        "",
        f"Memory: {results.replica_bytes_per_million / MIB:.0f} MiB per million hashes in each replica that matches "
        f"(32 bytes of hash and 8 of review id each); {results.store_bytes_per_hash:.0f} bytes a hash in the store "
        f"({results.store_bytes_per_hash * 1e6 / MIB:.0f} MiB per million; measured on {STORE_SAMPLE:,}). "
        f"PDQ of one bench photo's 512 px frame (as the ImageModel hashes it): {results.pdq_ms:.1f} ms.",
        "",
        f"Robustness: PDQ distance (of 256 bits) between each bench photo ({', '.join(PHOTOS)}) and an edit of it; "
        f"a match is at most {rules.match_distance}. Each upload is matched through its hash and the hash its mirror "
        "image would have (the smaller distance counts).",
        "",
        "| edit | distances | matched |",
        "|---|---|---|",
    ]
    for name, found in results.robustness.items():
        matched = sum(d <= rules.match_distance for d in found)
        lines.append(f"| {name} | {', '.join(map(str, found))} | {matched} of {len(found)} |")
    return lines


def main() -> None:
    print("\n".join(section(measure())))


if __name__ == "__main__":
    main()
