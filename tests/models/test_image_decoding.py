from __future__ import annotations

import io
import struct
import time
import zlib

import numpy as np
import pytest
import skimage.data
from PIL import Image
from support.hostile_images import (
    MIB,
    gif_of_tiny_sub_blocks,
    gif_with_comments,
    png_chunk,
    png_with_empty_chunks,
    tiff_of_directories,
)

from models.image_decoding import (
    MAX_FRAME_SIDE_PX,
    MAX_FRAMES,
    MAX_GIF_SUB_BLOCKS,
    MAX_JPEG_MARKERS,
    MAX_PNG_CHUNKS,
    MAX_SCAN_FRAMES,
    MAX_TIFF_ENTRIES,
    MAX_TOTAL_PIXELS,
    DecodeTimeout,
    ImageTooLarge,
    InvalidImage,
    decode_image,
    pick_frame_indices,
)

GENEROUS_MAX_PIXELS = 50_000_000
PLAN_MAX_PIXELS = 40_000_000  # the default plan's limit
# Hostile inputs must be answered well within this, on a shared 2-core CI machine; the unbounded decoder took
# minutes for the GIF and the WebP, 2.5 s for the APNG and 5 s for the TIFF below.
HOSTILE_TIME_BOUND_S = 3.0


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


# --- Hostile files, written byte by byte (Pillow would take minutes to write 100,000 frames) ---


def gif_with_frames(screen: tuple[int, int], boxes: list[tuple[int, int, int, int]]) -> bytes:
    """A GIF whose frames are (x, y, w, h) boxes; each holds one LZW-coded pixel (a larger box is truncated data)."""
    out = bytearray(b"GIF89a" + struct.pack("<HHBBB", *screen, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff")
    for box in boxes:
        out += b"\x2c" + struct.pack("<HHHHB", *box, 0) + b"\x02\x02\x44\x01\x00"  # clear, pixel 0, end
    return bytes(out + b"\x3b")


def one_pixel_gif_frames(count: int, screen: tuple[int, int]) -> bytes:
    one = gif_with_frames(screen, [(0, 0, 1, 1)])
    frame = one[19:-1]
    return one[:19] + frame * count + b"\x3b"


def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def apng_one_pixel_frames(count: int, canvas: tuple[int, int]) -> bytes:
    """An APNG: a blank full canvas, then count - 1 frames of one pixel each."""
    width, height = canvas
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
    data += png_chunk(b"acTL", struct.pack(">II", count, 0))
    data += png_chunk(b"fcTL", struct.pack(">IIIIIHHBB", 0, width, height, 0, 0, 1, 100, 0, 0))
    data += png_chunk(b"IDAT", zlib.compress(bytes((width + 1) * height), 1))
    pixel = zlib.compress(b"\x00\x00")
    frames = []
    for sequence in range(1, 2 * count - 1, 2):
        frames.append(png_chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, 1, 1, 0, 0, 1, 100, 0, 0)))
        frames.append(png_chunk(b"fdAT", struct.pack(">I", sequence + 1) + pixel))
    return data + b"".join(frames) + png_chunk(b"IEND", b"")


def webp_one_pixel_frames(count: int, canvas: tuple[int, int]) -> bytes:
    """An animated WebP: count frames of one lossless pixel on a large canvas."""
    one = encode(Image.new("RGB", (1, 1)), "WEBP", lossless=True)
    vp8l = one[12:]  # the single VP8L chunk

    def chunk(kind: bytes, payload: bytes) -> bytes:
        return kind + struct.pack("<I", len(payload)) + payload + b"\x00" * (len(payload) & 1)

    def u24(value: int) -> bytes:
        return struct.pack("<I", value)[:3]

    body = b"WEBP" + chunk(b"VP8X", b"\x02\x00\x00\x00" + u24(canvas[0] - 1) + u24(canvas[1] - 1))
    body += chunk(b"ANIM", struct.pack("<IH", 0, 0))
    body += chunk(b"ANMF", u24(0) * 4 + u24(100) + b"\x00" + vp8l) * count
    return b"RIFF" + struct.pack("<I", len(body)) + body


def tiff_pages(sizes: list[tuple[int, int]]) -> bytes:
    """A little-endian 8-bit greyscale TIFF, one page per size; every page points at the same 1-pixel strip."""
    entries, ifd_bytes = 8, 2 + 8 * 12 + 4
    strip_at = 8 + len(sizes) * ifd_bytes
    out = bytearray(b"II*\x00" + struct.pack("<I", 8))
    for index, (width, height) in enumerate(sizes):
        following = 0 if index == len(sizes) - 1 else 8 + (index + 1) * ifd_bytes
        tags = [(256, width), (257, height), (258, 8), (259, 1), (262, 1), (273, strip_at), (278, height), (279, 1)]
        out += struct.pack("<H", entries)
        for tag, value in tags:
            out += struct.pack("<HHII", tag, 4, 1, value)
        out += struct.pack("<I", following)
    return bytes(out + b"\x80")


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


# --- One test per attack: the outcome and a time bound ---


def test_a_gif_of_100k_one_pixel_frames_on_a_40_mp_screen_is_answered_quickly():
    data = one_pixel_gif_frames(100_000, (10_000, 4_000))  # 1.5 MB
    assert len(data) < 2_000_000

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < HOSTILE_TIME_BOUND_S
    assert decoded.frame_count == MAX_SCAN_FRAMES + 1  # counted up to the cap, not walked to the end
    assert len(decoded.frames) == MAX_TOTAL_PIXELS // 40_000_000  # only as many 40 MP screens as fit the budget


def test_a_gif_of_100k_frames_on_a_small_screen_gives_8_frames_of_the_window_quickly():
    decoded, seconds = timed(lambda: decode_image(one_pixel_gif_frames(100_000, (1000, 1000)), PLAN_MAX_PIXELS))

    assert seconds < HOSTILE_TIME_BOUND_S
    assert len(decoded.frames) == MAX_FRAMES


def test_an_apng_of_5000_frames_on_a_16_mp_canvas_is_answered_quickly():
    data = apng_one_pixel_frames(5_000, (4_000, 4_000))

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < HOSTILE_TIME_BOUND_S
    assert decoded.frame_count == 5_000  # from acTL: the header's count costs nothing
    assert len(decoded.frames) == MAX_TOTAL_PIXELS // 16_000_000


def test_an_animated_webp_of_100k_frames_is_answered_quickly():
    data = webp_one_pixel_frames(100_000, (4_000, 4_000))

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < HOSTILE_TIME_BOUND_S
    assert decoded.frame_count == 100_000
    assert len(decoded.frames) == MAX_TOTAL_PIXELS // 16_000_000


def test_a_tiff_of_30k_pages_is_not_walked_to_the_end():
    decoded, seconds = timed(lambda: decode_image(tiff_pages([(1, 1)] * 30_000), PLAN_MAX_PIXELS))

    assert seconds < HOSTILE_TIME_BOUND_S
    assert decoded.frame_count == MAX_SCAN_FRAMES + 1
    assert len(decoded.frames) == MAX_FRAMES


def test_a_tiff_whose_later_page_is_huge_is_too_large_before_decoding():
    data = tiff_pages([(8, 8), (8, 8), (20_000, 20_000)])

    started = time.perf_counter()
    with pytest.raises(ImageTooLarge) as raised:
        decode_image(data, PLAN_MAX_PIXELS)

    assert time.perf_counter() - started < HOSTILE_TIME_BOUND_S
    assert (raised.value.pixels, raised.value.max_pixels) == (400_000_000, PLAN_MAX_PIXELS)


def test_a_gif_whose_later_frame_grows_the_screen_past_the_plan_is_too_large_before_decoding():
    data = gif_with_frames((100, 100), [(0, 0, 1, 1), (0, 0, 1, 1), (0, 0, 1000, 1000)])

    started = time.perf_counter()
    with pytest.raises(ImageTooLarge) as raised:
        decode_image(data, max_pixels=50_000)

    assert time.perf_counter() - started < HOSTILE_TIME_BOUND_S
    assert (raised.value.pixels, raised.value.max_pixels) == (1_000_000, 50_000)


def test_an_mpo_whose_second_frame_is_over_the_plan_is_too_large():
    buffer = io.BytesIO()
    solid(10, (100, 100)).save(buffer, "MPO", save_all=True, append_images=[solid(200, (400, 400))])

    assert decode_image(buffer.getvalue(), max_pixels=160_000).frame_count == 2
    with pytest.raises(ImageTooLarge) as raised:
        decode_image(buffer.getvalue(), max_pixels=50_000)
    assert raised.value.pixels == 160_000


def test_a_passed_deadline_stops_decoding_before_the_next_frame():
    data = encode(solid(0), "GIF", save_all=True, append_images=[solid(50), solid(100)])

    with pytest.raises(DecodeTimeout):
        decode_image(data, GENEROUS_MAX_PIXELS, deadline=time.monotonic() - 1)
    assert len(decode_image(data, GENEROUS_MAX_PIXELS, deadline=time.monotonic() + 60).frames) == 3


def test_a_small_animated_gif_gives_every_frame():
    levels = [0, 60, 120, 180, 240]
    data = encode(solid(0), "GIF", save_all=True, append_images=[solid(level) for level in levels[1:]], duration=80)

    decoded = decode_image(data, GENEROUS_MAX_PIXELS)

    assert decoded.frame_count == len(levels)
    assert [frame.getpixel((10, 10))[0] for frame in decoded.frames] == pytest.approx(levels, abs=3)


# --- Structure walks: the blocks and directory entries Pillow would walk in Python, capped before it opens the file.
# Each bound is 1 s; measured 0.01-0.06 s (before the caps: 1.6 s for the GIF comments, 8 s for the TIFF pages).
WALK_TIME_BOUND_S = 1.0


def test_a_1x1_gif_with_9_mib_of_one_byte_comment_blocks_is_invalid_at_once():
    data = gif_with_comments(9 * MIB // 2, sub_block=1)  # 9 MiB: 4.7 million one-byte sub-blocks
    assert len(data) > 9 * MIB

    started = time.perf_counter()
    with pytest.raises(InvalidImage, match="blocks before its first frame"):
        decode_image(data, PLAN_MAX_PIXELS)
    assert time.perf_counter() - started < WALK_TIME_BOUND_S


def test_comment_blocks_after_the_first_frame_leave_it_scored_alone():
    decoded, seconds = timed(lambda: decode_image(gif_with_comments(9 * MIB // 2, 1, frames_first=1), PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S
    assert (decoded.frame_count, len(decoded.frames)) == (1, 1)  # the frame after the comments is not looked at


def test_nine_mib_of_comments_in_full_sub_blocks_as_encoders_write_them_is_scored():
    data = gif_with_comments(9 * MIB, sub_block=255)  # 37,000 sub-blocks: within the cap
    assert len(data) // 256 < MAX_GIF_SUB_BLOCKS

    assert len(decode_image(data, PLAN_MAX_PIXELS).frames) == 1


def test_gif_frames_of_one_byte_data_sub_blocks_are_walked_only_within_the_cap():
    data = gif_of_tiny_sub_blocks(20_000, frames=200)  # 4 million sub-blocks in all

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S
    assert decoded.frame_count == MAX_GIF_SUB_BLOCKS // 20_000  # the frames wholly inside the cap


def test_a_gif_whose_only_frame_has_millions_of_sub_blocks_is_still_decoded():
    # Pillow decodes a frame's own data in C: the cap only bounds what is walked to reach a later frame.
    decoded, seconds = timed(lambda: decode_image(gif_of_tiny_sub_blocks(4_000_000), PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S
    assert len(decoded.frames) == 1


def test_tiff_pages_of_thousands_of_entries_are_walked_only_within_the_entry_cap():
    data = tiff_of_directories(257, 3_000)

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S
    assert decoded.frame_count == MAX_TIFF_ENTRIES // 3_000


def test_a_tiff_whose_first_directory_is_over_the_entry_cap_is_invalid():
    with pytest.raises(InvalidImage, match="directory entries before its first frame"):
        decode_image(tiff_of_directories(1, MAX_TIFF_ENTRIES + 1), PLAN_MAX_PIXELS)


def test_a_tiff_whose_directories_loop_is_walked_once():
    data = bytearray(tiff_of_directories(2, 10))
    second = struct.unpack_from("<I", data, 4)[0] + 2 + 12 * 10 + 4
    struct.pack_into("<I", data, second + 2 + 12 * 10, 8 + 1)  # the second page points back at the first

    decoded, seconds = timed(lambda: decode_image(bytes(data), PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S and decoded.frame_count == 2


@pytest.mark.parametrize("after_image", [False, True], ids=["before its image", "after its image"])
def test_a_1x1_png_with_9_mib_of_empty_chunks_is_invalid_at_once(after_image):
    data = png_with_empty_chunks(9 * MIB // 12, after_image=after_image)  # 786,000 chunks: 2.1 s of Pillow's walk

    started = time.perf_counter()
    with pytest.raises(InvalidImage, match="chunks before its first frame"):
        decode_image(data, PLAN_MAX_PIXELS)
    assert time.perf_counter() - started < WALK_TIME_BOUND_S


def test_an_apng_over_the_chunk_cap_is_scored_on_the_frames_inside_it():
    frames = [solid(level) for level in range(0, 250, 10)]
    data = encode(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=50)
    end = data.rindex(b"IEND") - 4
    data = data[:end] + png_chunk(b"zzZz", b"") * MAX_PNG_CHUNKS + data[end:]
    # The flood sits after the last frame's data: every frame is whole inside the cap but the last, which is cut.

    decoded, seconds = timed(lambda: decode_image(data, PLAN_MAX_PIXELS))

    assert seconds < WALK_TIME_BOUND_S
    assert decoded.frame_count == len(frames) - 1


@pytest.mark.parametrize("filler", [b"\xff\xfe\x00\x02", b"\xff", b"\x00"], ids=["empty comments", "fill", "junk"])
def test_a_jpeg_with_9_mib_of_markers_or_filler_before_its_scan_is_invalid_at_once(filler):
    small = encode(solid(128, (8, 8)), "JPEG")
    after_app0 = 4 + int.from_bytes(small[4:6], "big")  # SOI, then APP0: the signature stays intact
    data = small[:after_app0] + filler * (9 * MIB // len(filler)) + small[after_app0:]  # 3.8 s for the comments

    started = time.perf_counter()
    with pytest.raises(InvalidImage, match="markers before its first scan"):
        decode_image(data, PLAN_MAX_PIXELS)
    assert time.perf_counter() - started < WALK_TIME_BOUND_S


def test_a_jpeg_with_as_many_markers_as_the_cap_allows_is_decoded():
    small = encode(solid(128, (8, 8)), "JPEG")
    markers_in_small = 6  # SOI's successor up to SOS: APP0, DQT, SOF0, DHT x 2 or 4, ...; far under the cap
    data = small[:2] + b"\xff\xfe\x00\x02" * (MAX_JPEG_MARKERS - 4 * markers_in_small) + small[2:]

    assert decode_image(data, PLAN_MAX_PIXELS).frames[0].getpixel((0, 0))[0] in range(120, 137)


# --- Conversions run on the shrunk frame: no full-size copy per conversion step.


# Full-size conversions allowed: Pillow's resize premultiplies alpha (RGBa, La) once; a palette is expanded once.
@pytest.mark.parametrize(
    ("mode", "expanded"), [("RGBA", ["RGBa"]), ("LA", ["La"]), ("I;16", []), ("P", ["RGBA", "RGBa"])]
)
def test_a_large_frame_is_shrunk_before_it_is_converted(monkeypatch, mode, expanded):
    if mode == "I;16":
        big = Image.fromarray(np.full((1500, 2000), 40_000, dtype=np.uint16))
    else:
        big = Image.new(mode, (2000, 1500))
    data = encode(big, "PNG", **({"transparency": 0} if mode == "P" else {}))
    converted: list[tuple[str, tuple[int, int]]] = []
    convert = Image.Image.convert

    def spy(self, target=None, *args, **kwargs):
        converted.append((target, self.size))
        return convert(self, target, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "convert", spy)
    (frame,) = decode_image(data, PLAN_MAX_PIXELS).frames

    full_size = [target for target, size in converted if max(size) > MAX_FRAME_SIDE_PX]
    assert full_size == expanded  # before: RGBA, then a composite and RGB, each at full size
    assert frame.mode == "RGB" and frame.size == (512, 384)


def test_a_large_float_tiff_is_scaled_on_the_shrunk_frame():
    import tracemalloc

    data = encode(Image.new("F", (4000, 3000), 0.5), "TIFF")  # 48 MB of float32 pixels
    tracemalloc.start()
    try:
        (frame,) = decode_image(data, PLAN_MAX_PIXELS).frames
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MIB  # numpy's arrays (traced) were of the 512x384 frame, not of 12 MP (48-144 MB)
    assert frame.getpixel((0, 0)) == (0, 0, 0)
