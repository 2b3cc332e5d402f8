"""Uploads built to cost the decoder's structure walks, not its pixels: GIF extension blocks and TIFF directories.
Written byte by byte (a few MB in milliseconds), deterministic."""

from __future__ import annotations

import struct
import zlib

_GIF_HEADER = b"GIF89a\x01\x00\x01\x00\x00\x00\x00"  # a 1x1 screen, no global colour table
_GIF_FRAME = b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00"  # one 1x1 frame
MIB = 1024 * 1024


def gif_with_comments(comment_bytes: int = 9 * MIB, sub_block: int = 255, *, frames_first: int = 0) -> bytes:
    """A 1x1 GIF whose comment extensions hold `comment_bytes` in sub-blocks of `sub_block` bytes (255 is the most;
    1 makes the most blocks), after `frames_first` frames; one frame after them."""
    sub_blocks, rest = divmod(comment_bytes, sub_block)
    comment = (bytes([sub_block]) + b"c" * sub_block) * sub_blocks + (bytes([rest]) + b"c" * rest if rest else b"")
    return _GIF_HEADER + _GIF_FRAME * frames_first + b"\x21\xfe" + comment + b"\x00" + _GIF_FRAME + b"\x3b"


def gif_of_tiny_sub_blocks(data_bytes: int, frames: int = 1) -> bytes:
    """A 1x1 GIF of `frames` frames whose image data comes in one-byte sub-blocks: `data_bytes` of them each."""
    frame = b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02" + b"\x01\x44" + b"\x01\x01" * (data_bytes - 1) + b"\x00"
    return _GIF_HEADER + frame * frames + b"\x3b"


def tiff_of_directories(pages: int, entries: int, *, width: int = 1, height: int = 1) -> bytes:
    """A little-endian TIFF of `pages` 1x1 greyscale pages, each directory padded to `entries` entries (unknown tags
    of type SHORT, value inline: cheap bytes, each one a Python object in Pillow's reader)."""
    core = [(256, 4, 1, width), (257, 4, 1, height), (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1),
            (273, 4, 1, 8), (277, 3, 1, 1), (278, 4, 1, height), (279, 4, 1, width * height)]  # fmt: skip
    pad = [(50_000 + i % 15_000, 3, 1, 0) for i in range(max(entries - len(core), 0))]
    directory_bytes = 2 + 12 * (len(core) + len(pad)) + 4
    out = bytearray(b"II*\x00" + struct.pack("<I", 8 + width * height))  # header, then the pixels, then the IFDs
    out += b"\x80" * (width * height)
    for page in range(pages):
        start = len(out)
        out += struct.pack("<H", len(core) + len(pad))
        for tag, kind, count, value in core + pad:
            out += struct.pack("<HHII", tag, kind, count, value)
        out += struct.pack("<I", start + directory_bytes if page + 1 < pages else 0)
    return bytes(out)



def png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def png_with_empty_chunks(count: int, *, after_image: bool = False) -> bytes:
    """A 1x1 greyscale PNG with `count` empty ancillary chunks (12 bytes each) before or after its image data."""
    header = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    image, flood = png_chunk(b"IDAT", zlib.compress(b"\x00\x80")), png_chunk(b"zzZz", b"") * count
    return header + (image + flood if after_image else flood + image) + png_chunk(b"IEND", b"")
