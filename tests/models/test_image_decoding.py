from __future__ import annotations

import io
import struct
import time
import zlib

import numpy as np
import pytest
import skimage.data
from PIL import Image

from models.image_decoding import (
    MAX_FRAME_SIDE_PX,
    MAX_FRAMES,
    ImageTooLarge,
    InvalidImage,
    decode_image,
    pick_frame_indices,
)

GENEROUS_MAX_PIXELS = 50_000_000


def encode(image: Image.Image, image_format: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height, with one tiny IDAT: a bomb costs nothing to send."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00")) + chunk(b"IEND", b"")


def solid(value: int, size: tuple[int, int] = (64, 48)) -> Image.Image:
    return Image.new("RGB", size, (value, value, value))


@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    return Image.fromarray(skimage.data.astronaut())


@pytest.mark.parametrize(
    ("image_format", "options"),
    [("JPEG", {}), ("PNG", {}), ("WEBP", {}), ("GIF", {}), ("BMP", {}), ("TIFF", {"compression": "tiff_lzw"})],
)
def test_every_accepted_format_decodes_to_one_rgb_frame(astronaut, image_format, options):
    decoded = decode_image(encode(astronaut, image_format, **options), GENEROUS_MAX_PIXELS)

    assert decoded.format == image_format
    assert (decoded.width, decoded.height) == (512, 512)
    assert decoded.frame_count == 1
    assert [frame.mode for frame in decoded.frames] == ["RGB"]


def test_the_format_comes_from_the_bytes_whatever_the_upload_declared(astronaut):
    png_sent_as_jpeg = encode(astronaut, "PNG")

    assert decode_image(png_sent_as_jpeg, GENEROUS_MAX_PIXELS).format == "PNG"


def test_frames_are_shrunk_to_512_px_keeping_the_aspect_ratio():
    retina = Image.fromarray(skimage.data.retina()).resize((1411, 700))

    for image_format in ("JPEG", "PNG"):
        decoded = decode_image(encode(retina, image_format), GENEROUS_MAX_PIXELS)
        (frame,) = decoded.frames
        assert (decoded.width, decoded.height) == (1411, 700)
        assert frame.width == MAX_FRAME_SIDE_PX
        assert frame.height == pytest.approx(MAX_FRAME_SIDE_PX * 700 / 1411, abs=1)


def test_small_images_keep_their_size(astronaut):
    small = astronaut.resize((100, 80))

    assert decode_image(encode(small, "PNG"), GENEROUS_MAX_PIXELS).frames[0].size == (100, 80)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello, this is plain text and not an image",
        b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF",
        bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8)),
    ],
    ids=["empty", "text", "pdf", "random"],
)
def test_bytes_that_are_not_an_image_are_invalid(data):
    with pytest.raises(InvalidImage):
        decode_image(data, GENEROUS_MAX_PIXELS)


@pytest.mark.parametrize("image_format", ["ICO", "PPM", "TGA", "PCX"])
def test_formats_pillow_can_read_but_we_do_not_accept_are_invalid(astronaut, image_format):
    with pytest.raises(InvalidImage):
        decode_image(encode(astronaut.resize((64, 64)), image_format), GENEROUS_MAX_PIXELS)


def test_a_truncated_jpeg_is_invalid(astronaut):
    data = encode(astronaut, "JPEG")

    with pytest.raises(InvalidImage):
        decode_image(data[: len(data) // 2], GENEROUS_MAX_PIXELS)


def test_a_png_with_corrupt_pixel_data_is_invalid(astronaut):
    data = bytearray(encode(astronaut, "PNG"))
    data[200:400] = bytes(200)

    with pytest.raises(InvalidImage):
        decode_image(bytes(data), GENEROUS_MAX_PIXELS)


def test_a_jpeg_signature_followed_by_garbage_is_invalid():
    with pytest.raises(InvalidImage):
        decode_image(b"\xff\xd8\xff" + b"\x00" * 100, GENEROUS_MAX_PIXELS)


@pytest.mark.parametrize("side", [12_000, 50_000])
def test_a_decompression_bomb_is_too_large_at_once_without_decoding(side):
    started = time.perf_counter()

    with pytest.raises(ImageTooLarge) as raised:
        decode_image(png_header_only(side, side), max_pixels=10**12)

    assert time.perf_counter() - started < 0.5
    assert raised.value.pixels == side * side


def test_more_pixels_than_max_pixels_is_too_large_before_decoding():
    with pytest.raises(ImageTooLarge) as raised:
        decode_image(png_header_only(4000, 3000), max_pixels=1_000_000)

    assert (raised.value.pixels, raised.value.max_pixels) == (12_000_000, 1_000_000)


def test_max_pixels_is_respected_exactly_at_the_boundary():
    data = encode(solid(10, (100, 50)), "PNG")

    assert decode_image(data, max_pixels=5000).frame_count == 1
    with pytest.raises(ImageTooLarge):
        decode_image(data, max_pixels=4999)


def test_exif_orientation_is_applied():
    stored = Image.new("RGB", (200, 100), (0, 0, 255))
    stored.paste((255, 0, 0), (0, 0, 100, 100))  # left half red
    exif = Image.Exif()
    exif[0x0112] = 6  # display rotated 90 degrees clockwise: the left edge becomes the top

    decoded = decode_image(encode(stored, "JPEG", exif=exif), GENEROUS_MAX_PIXELS)

    (frame,) = decoded.frames
    assert (decoded.width, decoded.height) == frame.size == (100, 200)
    red, _, blue = frame.getpixel((50, 20))
    assert red > 200 and blue < 50


def test_transparent_pixels_are_composited_on_white():
    transparent = Image.new("RGBA", (32, 32), (0, 0, 0, 0))

    for image_format in ("PNG", "WEBP", "GIF"):
        (frame,) = decode_image(encode(transparent, image_format), GENEROUS_MAX_PIXELS).frames
        assert frame.getpixel((5, 5)) == (255, 255, 255), image_format


def test_sixteen_bit_greyscale_is_scaled_not_clipped():
    mid_grey = Image.fromarray(np.full((16, 16), 32768, dtype=np.uint16))

    (frame,) = decode_image(encode(mid_grey, "PNG"), GENEROUS_MAX_PIXELS).frames

    assert frame.getpixel((0, 0)) == (127, 127, 127)


def test_eight_evenly_spaced_frames_are_picked_first_and_last_included():
    assert pick_frame_indices(3) == [0, 1, 2]
    assert pick_frame_indices(MAX_FRAMES) == list(range(MAX_FRAMES))
    assert pick_frame_indices(20) == [0, 3, 5, 8, 11, 14, 16, 19]


@pytest.mark.parametrize("image_format", ["GIF", "WEBP", "PNG"])
def test_animated_images_give_the_picked_frames_in_order(image_format):
    levels = [10 * index for index in range(20)]
    frames = [solid(level) for level in levels]
    data = encode(frames[0], image_format, save_all=True, append_images=frames[1:], duration=50, loop=0)

    decoded = decode_image(data, GENEROUS_MAX_PIXELS)

    assert decoded.frame_count == 20
    seen = [frame.getpixel((10, 10))[0] for frame in decoded.frames]
    expected = [levels[index] for index in pick_frame_indices(20)]
    assert seen == pytest.approx(expected, abs=3)
