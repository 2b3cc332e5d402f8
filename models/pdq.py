"""PDQ, Meta's perceptual image hash (256 bits and a quality of 0-100), in numpy.

Why here and not a package: `pdqhash` (the C++ reference's Python binding, which ThreatExchange and HMA use) ships
only as a source distribution, and this project installs wheels only; no maintained wheel computes PDQ. This follows
the reference algorithm step by step (facebook/ThreatExchange, pdq/python/pdqhashing/hasher/pdq_hasher.py and
hashing.pdf): luminance, two passes of Jarosz box filters (a tent filter) sized 1/128 of each dimension, decimation
to 64x64, the quality metric from the quantised gradients, the 16x16 low frequencies of a 2D DCT, and one bit per
coefficient above their median. tests/models/test_pdq.py checks it bit for bit against a hash ThreatExchange's own
test suite pins for an image embedded in that test.

The hex form is the reference's: bit `16 * i + j` (DCT row i, column j) is bit `16 * i + j` of a 256-bit number
written as 64 hex digits, most significant first, so hashes exchanged with HMA or ThreatExchange compare as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
from PIL import Image

HASH_BITS = 256
# Column j of the 16x16 coefficients is horizontal frequency j + 1: a left-right mirror negates the odd ones (j even).
_MIRROR_SIGNS = np.where(np.arange(16) % 2 == 0, -1.0, 1.0)[None, :]
HEX_CHARS = HASH_BITS // 4
# The reference's luminance coefficients (the 'Y' of YUV).
_LUMA = np.array([0.299, 0.587, 0.114])
_JAROSZ_PASSES = 2
_JAROSZ_WINDOW_DIVISOR = 128
# What ThreatExchange's Python reference does before hashing: hashes of larger images barely change below this size.
MAX_SIDE_PX = 512


@dataclass(frozen=True)
class PdqHash:
    hash: str  # 64 lowercase hex digits
    quality: int  # 0-100; below 50 a hash is not trusted for matching (flat or featureless images)
    # The hash the left-right mirror image would have, from the same DCT (the reference's dihedral hashes: the
    # coefficients of odd horizontal frequency change sign), so that a mirrored re-upload can be matched too.
    mirrored: str | None = None


@cache
def _dct_matrix() -> np.ndarray:
    """16x64: rows 1..16 of the 64-point DCT-II (the reference leaves out the constant scale, which no bit needs)."""
    i = np.arange(1, 17)[:, None]
    j = np.arange(64)[None, :]
    return np.cos(np.pi / 2 / 64 * i * (2 * j + 1))


def _box_along_axis0(values: np.ndarray, window: int) -> np.ndarray:
    """The reference's 1D box filter along axis 0: out[i] is the mean of in[i - (w - h) .. i + h - 1], clipped to the
    array, with h = (w + 2) // 2 (so the window leans one way for an even w, exactly as the reference's)."""
    n = values.shape[0]
    half = (window + 2) // 2
    index = np.arange(n)
    low = np.clip(index - (window - half), 0, n)
    high = np.clip(index + half, 0, n)  # exclusive
    sums = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(values, axis=0)])
    counts = (high - low).reshape(-1, *([1] * (values.ndim - 1)))
    return (sums[high] - sums[low]) / counts


def _box_rows(n: int, window: int, rows: np.ndarray) -> np.ndarray:
    """(len(rows), n): those rows of the box filter `_box_along_axis0` as a matrix (row i averages in[low_i:high_i])."""
    half = (window + 2) // 2
    low = np.clip(rows - (window - half), 0, n)
    high = np.clip(rows + half, 0, n)
    out = np.zeros((len(rows), n))
    for row, (start, stop) in enumerate(zip(low, high)):
        out[row, start:stop] = 1.0 / (stop - start)
    return out


@lru_cache(maxsize=128)
def _filter_and_pick(n: int) -> np.ndarray:
    """(64, n): the Jarosz passes along one axis (two box filters of width ceil(n / 128)) followed by the
    reference's decimation to 64 samples, as one matrix. The passes along rows and along columns are linear and act
    on different axes, so they commute, and only the 64 x 64 decimated values are ever needed: filtering the whole
    image and then picking costs ten times more. Built from the few filter rows each sample reaches (a width is at
    most 4 for a 512 px side), never an n x n matrix, so an image size met for the first time costs little."""
    window = (n + _JAROSZ_WINDOW_DIVISOR - 1) // _JAROSZ_WINDOW_DIVISOR
    picked = _box_rows(n, window, ((np.arange(64) + 0.5) * n / 64).astype(int))
    for _ in range(_JAROSZ_PASSES - 1):
        reached = np.flatnonzero(picked.any(axis=0))
        picked = picked[:, reached] @ _box_rows(n, window, reached)
    return picked


def _downsampled(luma: np.ndarray) -> np.ndarray:
    """The 64x64 block: the reference's Jarosz filter, then its decimation."""
    rows, cols = luma.shape
    return _filter_and_pick(rows) @ luma @ _filter_and_pick(cols).T


def _quality(block: np.ndarray) -> int:
    """The reference's heuristic: the sum of the gradients quantised to integer percent, over 90, at most 100."""
    vertical = np.trunc((block[:-1, :] - block[1:, :]) * 100 / 255)
    horizontal = np.trunc((block[:, :-1] - block[:, 1:]) * 100 / 255)
    gradient_sum = int(np.abs(vertical).sum() + np.abs(horizontal).sum())
    return min(100, gradient_sum // 90)


def _bits_hex(coefficients: np.ndarray) -> str:
    # The reference's Torben median of 256 values is the lower middle one (the 128th smallest).
    median = np.sort(coefficients, axis=None)[(coefficients.size - 1) // 2]
    bits = (coefficients > median).reshape(-1)
    number = 0
    for position in np.flatnonzero(bits):
        number |= 1 << int(position)
    return f"{number:0{HEX_CHARS}x}"


def pdq_of_luma(luma: np.ndarray) -> PdqHash:
    """The hash of a 2D array of luminance values (0-255)."""
    block = _downsampled(np.asarray(luma, dtype=np.float64))
    dct = _dct_matrix()
    coefficients = dct @ block @ dct.T
    mirrored = coefficients * _MIRROR_SIGNS
    return PdqHash(hash=_bits_hex(coefficients), quality=_quality(block), mirrored=_bits_hex(mirrored))


def pdq_of_image(image: Image.Image) -> PdqHash:
    """The hash of a PIL image (any mode; alpha is ignored, as the reference's RGB reading does)."""
    if max(image.size) > MAX_SIDE_PX:
        image = image.copy()
        image.thumbnail((MAX_SIDE_PX, MAX_SIDE_PX))
    rgb = np.asarray(image.convert("RGB"), dtype=np.float64)
    return pdq_of_luma(rgb @ _LUMA)


def pack_hashes(hashes: list[str]) -> np.ndarray:
    """(n, 4) uint64: each 64-hex-digit hash as four big-endian 64-bit words (how a bank is kept and scanned)."""
    if not hashes:
        return np.zeros((0, 4), dtype=np.uint64)
    raw = np.frombuffer(bytes.fromhex("".join(hashes)), dtype=">u8").reshape(-1, 4)
    return raw.astype(np.uint64)


def hamming_distances(packed: np.ndarray, query: str) -> np.ndarray:
    """Bits apart of `query` from every packed hash: XOR and a popcount per word."""
    return np.bitwise_count(packed ^ pack_hashes([query])).sum(axis=1, dtype=np.int32)


def hamming_distance(first: str, second: str) -> int:
    return int(hamming_distances(pack_hashes([first]), second)[0])
