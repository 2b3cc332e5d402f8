"""Per-language score calibration of the text model: one monotone map per (language, category).

One set of review thresholds cannot suit every language: on real dev comments the default profile's thresholds
flag 40% of benign Arabic comments and 5% of benign Danish ones. Each language with real dev data therefore gets,
per default-profile category, a piecewise-linear map through (0, 0), (its own review threshold, the shared review
threshold), (the shared block threshold, itself) where the language's threshold is below it, and (1, 1): a score
at the language's threshold comes out at the shared one, so a profile's single review threshold acts as the
per-language one, and order within a language is kept (the map is increasing).
`training/language_calibration.py` fits the maps on the dev split; they are stored in
`models/weights/text/calibration.json` with the model version they belong to.

A text whose language is not detected, or is one without a map (no dev data), keeps its uncalibrated scores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FALLBACK = "*"  # the map of a text whose language has no map of its own (or was not detected): fitted on all languages
# Knots: [[raw, calibrated], ...], raw strictly increasing from 0 to 1, calibrated non-decreasing from 0 to 1.
Knots = list[list[float]]


class CalibrationMismatch(ValueError):
    """The calibration file belongs to another model version, or its maps are not monotone maps of [0, 1]."""


class LanguageCalibration:
    def __init__(self, maps: dict[str, dict[str, Knots]]) -> None:
        for language, categories in maps.items():
            for category, knots in categories.items():
                _check_knots(f"{language}/{category}", knots)
        self._maps = {language: {category: (np.array([x for x, _ in knots]), np.array([y for _, y in knots]))
                                 for category, knots in categories.items()}
                      for language, categories in maps.items()}  # fmt: skip

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages with a map of their own (FALLBACK left out)."""
        return tuple(sorted(language for language in self._maps if language != FALLBACK))

    @classmethod
    def read(cls, path: Path, model_version: str) -> "LanguageCalibration":
        """The maps of `path`; none (every score unchanged) when the file does not exist."""
        if not Path(path).exists():
            return cls({})
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document.get("model_version") != model_version:
            raise CalibrationMismatch(f"{path} is for {document.get('model_version')}, not {model_version}")
        return cls(document["languages"])

    def apply(self, language: str | None, scores: dict[str, float]) -> dict[str, float]:
        """`scores` with each category that has a map for `language` mapped; the others unchanged."""
        maps = self._maps.get(language or FALLBACK) or self._maps.get(FALLBACK)
        if not maps:
            return scores
        return {category: float(np.interp(score, *maps[category])) if category in maps else score
                for category, score in scores.items()}  # fmt: skip


def review_knots(language_review: float, shared_review: float, shared_block: float | None = None) -> Knots:
    """The map that sends `language_review` to `shared_review`, 0 to 0 and 1 to 1 (linear between); and
    `shared_block` to itself where both thresholds lie below it, so that only the review region moves and the
    block threshold (chosen for 95% precision on all languages) keeps its meaning."""
    if not 0.0 < language_review < 1.0:
        # A language whose own threshold is at an end (nothing or everything flagged) keeps its scores.
        return [[0.0, 0.0], [1.0, 1.0]]
    knots = [[0.0, 0.0], [round(language_review, 6), shared_review]]
    if shared_block is not None and max(language_review, shared_review) < shared_block < 1.0:
        knots.append([shared_block, shared_block])
    return [*knots, [1.0, 1.0]]


def _check_knots(name: str, knots: Knots) -> None:
    xs, ys = [x for x, _ in knots], [y for _, y in knots]
    ok = (len(knots) >= 2 and xs[0] == 0.0 and xs[-1] == 1.0 and ys[0] == 0.0 and ys[-1] == 1.0
          and all(a < b for a, b in zip(xs, xs[1:])) and all(a <= b for a, b in zip(ys, ys[1:])))  # fmt: skip
    if not ok:
        raise CalibrationMismatch(f"calibration map {name} is not an increasing map of [0, 1] onto itself: {knots}")
