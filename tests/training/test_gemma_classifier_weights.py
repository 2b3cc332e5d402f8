"""The classifier's loss weights (training/gemma_classifier.py, row_weights): each language's rows weigh
1/sqrt(its count), and a written functional row weighs WRITTEN_WEIGHT of a real comment of its language, so the
written behaviours cannot outweigh the real comments."""

from __future__ import annotations

import math

import pytest

from training.gemma_classifier import WRITTEN_WEIGHT, Row, row_weights


def _rows(lang: str, real: int, written: int) -> list[Row]:
    nan = float("nan")
    return ([Row(f"{lang} real {i}", lang, "some-dataset", [0.0] + [nan] * 5) for i in range(real)]
            + [Row(f"{lang} written {i}", lang, "functional-written", [1.0] + [nan] * 5) for i in range(written)])


def test_a_written_row_weighs_its_share_of_a_real_row_of_its_language():
    rows = _rows("en", 90, 10) + _rows("nl", 0, 25)
    w = row_weights(rows, 0.5).numpy()
    assert w.mean() == pytest.approx(1.0)
    assert w[90] == pytest.approx(0.5 * w[0])  # English: written against real, same language count
    # Dutch has only written rows: 1/sqrt(25) against English's 1/sqrt(100), both at the written share
    assert w[100] == pytest.approx(w[90] * math.sqrt(100) / math.sqrt(25))


def test_at_full_weight_the_written_rows_are_weighted_as_real_ones():
    rows = _rows("de", 30, 30)
    w = row_weights(rows, 1.0).numpy()
    assert w.min() == pytest.approx(w.max()) == pytest.approx(1.0)


def test_the_shipped_recipe_weighs_written_rows_below_real_ones():
    assert 0 < WRITTEN_WEIGHT < 1
