"""PDQ in numpy (models/pdq.py) against the reference.

tests/data/pdq/threatexchange-random.png is the 26x28 PNG that ThreatExchange's own test suite embeds in base64
(facebook/ThreatExchange, python-threatexchange/threatexchange/tests/hashing/test_pdq_hasher.py, RANDOM_IMAGE_BASE64),
with the hash that suite expects from the C++ reference (`pdqhash`): RANDOM_IMAGE_PDQ below. An image that small
takes box filters of width 1, so the filter is checked apart: against a line-by-line port of the reference's
`box1DFloat` (its four phases), on random data of the widths large images use.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import skimage.data
from PIL import Image

from models.pdq import _box_along_axis0, hamming_distance, pdq_of_image, pdq_of_luma

DATA = Path(__file__).resolve().parent.parent / "data" / "pdq"
RANDOM_IMAGE_PDQ = "ad64cd9875e131a177b1f2a0d6b38ae1de9ea80421e4c51dde1b0363deba3466"


def test_the_hash_of_threatexchanges_test_image_is_the_reference_hash_bit_for_bit():
    found = pdq_of_image(Image.open(DATA / "threatexchange-random.png"))
    assert found.hash == RANDOM_IMAGE_PDQ
    assert hamming_distance(found.hash, RANDOM_IMAGE_PDQ) == 0


def _reference_box_1d(values: list[float], window: int) -> list[float]:
    """The reference's box1DFloat, phase by phase (pdq/python/pdqhashing/hasher/pdq_hasher.py)."""
    half = (window + 2) // 2
    out, total, size, left, right = [0.0] * len(values), 0.0, 0, 0, 0
    for _ in range(half - 1):
        total, size, right = total + values[right], size + 1, right + 1
    written = 0
    for _ in range(window - half + 1):
        total, size, right = total + values[right], size + 1, right + 1
        out[written], written = total / size, written + 1
    for _ in range(len(values) - window):
        total += values[right] - values[left]
        right, left = right + 1, left + 1
        out[written], written = total / size, written + 1
    for _ in range(half - 1):
        total, size, left = total - values[left], size - 1, left + 1
        out[written], written = total / size, written + 1
    return out


@pytest.mark.parametrize(("length", "window"), [(64, 1), (100, 2), (300, 3), (512, 4), (513, 5), (77, 8)])
def test_the_box_filter_is_the_references(length, window):
    values = np.random.default_rng(length * window).uniform(0, 255, size=(length, 3))
    ours = _box_along_axis0(values, window)
    for column in range(3):
        np.testing.assert_allclose(ours[:, column], _reference_box_1d(list(values[:, column]), window), rtol=1e-9)


def test_a_flat_image_has_quality_zero_and_a_photo_full_quality():
    assert pdq_of_luma(np.full((300, 200), 128.0)).quality == 0
    assert pdq_of_image(Image.fromarray(skimage.data.astronaut())).quality == 100


def test_the_hash_survives_a_resize_and_a_recompression_and_tells_photos_apart():
    astronaut = Image.fromarray(skimage.data.astronaut())
    original = pdq_of_image(astronaut).hash
    resized = pdq_of_image(astronaut.resize((300, 300), Image.Resampling.BICUBIC)).hash
    assert hamming_distance(original, resized) <= 16
    other = pdq_of_image(Image.fromarray(skimage.data.chelsea())).hash
    assert hamming_distance(original, other) > 80
    assert re.fullmatch("[0-9a-f]{64}", original)  # 256 bits as lower-case hex, as PDQ's reference writes them


def test_filtering_only_the_decimated_samples_equals_filtering_the_whole_image_then_decimating():
    """models/pdq.py folds the reference's four box passes and its decimation into two matrices; here the reference's
    order, pass by pass over the whole image, on an image whose windows are 2 (rows) and 3 (columns)."""
    from models.pdq import _downsampled

    luma = np.random.default_rng(7).uniform(0, 255, size=(150, 260))
    full = luma.copy()
    for _ in range(2):
        full = np.array([_reference_box_1d(list(row), 3) for row in full])
        full = np.array([_reference_box_1d(list(col), 2) for col in full.T]).T
    rows = ((np.arange(64) + 0.5) * 150 / 64).astype(int)
    cols = ((np.arange(64) + 0.5) * 260 / 64).astype(int)
    np.testing.assert_allclose(_downsampled(luma), full[np.ix_(rows, cols)], rtol=1e-9)
