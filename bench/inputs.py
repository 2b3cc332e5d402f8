"""What both sides score: real photos as JPEG bytes (also at phone size), and texts of different lengths."""

from __future__ import annotations

import io
import math

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
