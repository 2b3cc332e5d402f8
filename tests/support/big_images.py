"""Large uploads for the tests: phone-sized photos (made as `make bench` makes them), a few-MB animation, and a GIF
of many cheap frames. Deterministic (fixed seeds)."""

from __future__ import annotations

import io

from bench.inputs import grainy_photo, photo_of_size

__all__ = ["animated_gif", "gif_of_tiny_frames", "photo_of_size"]


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
