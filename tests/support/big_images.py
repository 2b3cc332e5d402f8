"""Phone-sized uploads built from scikit-image's sample photos: upscaled, with sensor-like grain.

A photo from a phone is 3-8 MB of JPEG because of its detail and noise; an upscaled 512 px sample alone compresses to
a fraction of that, so grain is added until the file reaches the size asked for. Deterministic (fixed seeds).
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image
from skimage import data as photos

SAMPLES = {"astronaut": photos.astronaut, "coffee": photos.coffee, "chelsea": photos.chelsea}


def grainy_photo(side: int, *, sample: str = "astronaut", grain: int = 16, seed: int = 0) -> Image.Image:
    """The sample upscaled to `side` px on its long edge, with uniform grain of +-`grain` levels."""
    small = Image.fromarray(SAMPLES[sample]())
    scale = side / max(small.size)
    big = small.resize((round(small.width * scale), round(small.height * scale)), Image.Resampling.BICUBIC)
    noise = np.random.default_rng(seed).integers(-grain, grain + 1, (big.height, big.width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(np.asarray(big, dtype=np.int16) + noise, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, image_format: str) -> bytes:
    buffer = io.BytesIO()
    options = {"quality": 95} if image_format == "JPEG" else {"compress_level": 1}
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def photo_of_size(low: int, high: int, image_format: str = "JPEG", *, sample: str = "astronaut") -> bytes:
    """A grainy photo whose file is between `low` and `high` bytes: its side is searched (size grows with area)."""
    side = 2000
    for _ in range(12):
        data = encoded(grainy_photo(side, sample=sample), image_format)
        if low <= len(data) < high:
            return data
        side = round(side * math.sqrt((low + high) / 2 / len(data)))
    raise AssertionError(f"no {image_format} between {low} and {high} bytes (last: {len(data)} at {side} px)")


def animated_gif(frames: int = 16, side: int = 512) -> bytes:
    """An animation panning across a grainy photo: each frame differs, so the file is a few MB."""
    photo = grainy_photo(side * 2, sample="coffee", grain=24)
    step = (photo.width - side) // max(frames - 1, 1)
    pictures = [photo.crop((i * step, 0, i * step + side, side)).quantize(256) for i in range(frames)]
    buffer = io.BytesIO()
    pictures[0].save(buffer, format="GIF", save_all=True, append_images=pictures[1:], duration=80, loop=0)
    return buffer.getvalue()


def gif_of_tiny_frames(count: int, screen: tuple[int, int] = (1, 1)) -> bytes:
    """A GIF of `count` one-pixel frames (14 bytes each) on a screen of `screen` pixels: cheap bytes, many frames."""
    width, height = screen
    header = b"GIF89a" + width.to_bytes(2, "little") + height.to_bytes(2, "little") + b"\x00\x00\x00"
    frame = b"\x2c" + b"\x00\x00" * 2 + (1).to_bytes(2, "little") * 2 + b"\x00" + b"\x02\x02\x44\x01\x00"
    return header + frame * count + b"\x3b"
