"""The blend text model: the served usem3 model, its toxic score blended with EmbeddingGemma-300M's (the cascade's
second stage, and a version of its own).

Every category but `toxic` is the usem3 model's, unchanged. For `toxic`, each window is also embedded by the frozen
EmbeddingGemma (`models.embeddinggemma`) and scored by a logistic head; the two logits are z-scored (with their
means and spreads on the dev split) and mixed, usem3's share chosen on dev macro ROC AUC. The mix is then mapped,
monotonically, onto usem3's own toxic scale: the map sends each quantile of the blend over benign dev comments to
the same quantile of usem3's toxic score over them. So a threshold flags about the same share of benign comments
under both models, every profile and per-language map stays meaningful, and what the blend adds shows up as recall.

`training/fit_gemma_blend.py` fits the head, the mix and the map and writes them to `gemma-blend.json` beside the
weights; its hash is part of `model_version` (`<usem3 version>-gb<digest>`). The Gemma weights come from
`make gemma` (`MODERATION_GEMMA_DIR`); they are under Google's Gemma Terms of Use, not this project's licence.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models import language_id
from models.embeddinggemma import ONNX_INT8_FILE, GemmaEncoder, gemma_dir as default_gemma_dir
from models.log_odds import logit
from models.text_calibration import LanguageCalibration
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel

BLEND_FILE = "gemma-blend.json"
# The blend's own per-language maps (fitted on its dev scores like calibration.json is on usem3's), keyed to its
# model_version; absent, the blend is served uncalibrated.
BLEND_CALIBRATION_FILE = "calibration-gemma-blend.json"
# The frozen encoder's blend (training/fit_gemma_blend.py), kept beside the served fine-tuned one: copied over the two
# files above (and the decision route refitted) it is served again.
FROZEN_BLEND_FILE = "gemma-blend-frozen.json"
FROZEN_BLEND_CALIBRATION_FILE = "calibration-gemma-blend-frozen.json"
BLENDED_CATEGORY = "toxic"
# Gemma reads at most this many windows of a text: those usem3 scores most toxic. One window costs Gemma about 75 ms
# on a core without AVX-512 VNNI (about 25 ms with it), so a plan's longest text (20,000 characters, about 130
# windows) would take it 3 to 10 s; capped, at most about 0.6 s. usem3 still reads every window. The blend file
# carries the cap (`windows_per_text`), so it is part of the version; training/fit_gemma_blend.py writes this one.
GEMMA_WINDOWS_PER_TEXT = 8


@dataclass(frozen=True)
class GemmaBlend:
    coef: np.ndarray  # (768,) the Gemma head's weights
    bias: float
    use_mean: float  # dev mean and spread of usem3's toxic logit
    use_std: float
    gemma_mean: float  # and of the Gemma head's logit
    gemma_std: float
    use_share: float  # the mix: use_share * z(usem3) + (1 - use_share) * z(gemma)
    map_from: np.ndarray  # increasing blend values (quantiles over benign dev comments) ...
    map_to: np.ndarray  # ... and usem3's toxic scores at the same quantiles
    windows_per_text: int | None  # the most windows of a text Gemma reads (None: all; files before the cap)
    digest: str
    # Which export of Gemma the head reads: the frozen model's, or the fine-tuned classifier's (whose file name
    # carries its adapter's hash, so the blend's digest, and the version, change with it).
    encoder_onnx: str = ONNX_INT8_FILE

    @classmethod
    def read(cls, path: Path) -> "GemmaBlend":
        raw = Path(path).read_bytes()
        document = json.loads(raw)
        return cls(np.array(document["coef"], dtype=np.float64), float(document["bias"]),
                   *(float(document[k]) for k in ("use_mean", "use_std", "gemma_mean", "gemma_std", "use_share")),
                   np.array(document["map_from"], dtype=np.float64), np.array(document["map_to"], dtype=np.float64),
                   document.get("windows_per_text"), hashlib.sha256(raw).hexdigest()[:8],
                   document.get("encoder_onnx", ONNX_INT8_FILE))

    def mix(self, use_toxic: np.ndarray, gemma_embeddings: np.ndarray) -> np.ndarray:
        """The blend before the map (what the share was chosen on)."""
        use_z = (logit(use_toxic) - self.use_mean) / self.use_std
        gemma_z = (gemma_embeddings @ self.coef + self.bias - self.gemma_mean) / self.gemma_std
        return self.use_share * use_z + (1 - self.use_share) * gemma_z

    def toxic(self, use_toxic: np.ndarray, gemma_embeddings: np.ndarray) -> np.ndarray:
        """Blended toxic scores on usem3's scale: [0, 1], increasing in the mix."""
        mixed = self.mix(use_toxic, gemma_embeddings)
        # Beyond the benign quantiles, continue in logit space so that the order of strong scores is kept.
        low, high = self.map_from[0], self.map_from[-1]
        inside = np.interp(mixed, self.map_from, self.map_to)
        top = 1 / (1 + np.exp(-(logit(np.array(self.map_to[-1])) + (mixed - high))))
        bottom = 1 / (1 + np.exp(-(logit(np.array(self.map_to[0])) + (mixed - low))))
        return np.where(mixed > high, top, np.where(mixed < low, bottom, inside))


class GemmaBlendTextModel(TextToxicityModel):
    """A TextToxicityModel whose toxic column is the blend; loaded by the registry's `use_gemma_blend` loader."""

    def __init__(self, base: TextToxicityModel, encoder: GemmaEncoder, blend: GemmaBlend):
        # Takes over the loaded usem3 model as it is (classifier, tokenizer, side heads, columns) rather than
        # loading it twice; only score_windows and the version differ.
        self.__dict__.update(base.__dict__)
        self._gemma, self._blend = encoder, blend
        self._toxic_column = self.categories.index(BLENDED_CATEGORY)
        self.usem3_model_version = base.model_version
        self.model_version = f"{base.model_version}-gb{blend.digest}"

    @classmethod
    def load(cls, weights: str | None = None, *, threads: int = 1, calibrated: bool = True,
             gemma_dir: str | None = None, blend_file: str = BLEND_FILE,
             calibration_file: str = BLEND_CALIBRATION_FILE) -> "GemmaBlendTextModel":
        """usem3's checkpoint and side heads, `gemma-blend.json` beside them, the Gemma export of `gemma_dir`
        (default `MODERATION_GEMMA_DIR`), and when `calibrated` the blend's own per-language maps."""
        weights_path = Path(weights or DEFAULT_WEIGHTS)
        base = TextToxicityModel.load(str(weights_path), threads=threads, calibrated=False)
        blend = GemmaBlend.read(weights_path.with_name(blend_file))
        model = cls(base, GemmaEncoder(gemma_dir or default_gemma_dir(), onnx_file=blend.encoder_onnx), blend)
        if calibrated:
            path = weights_path.with_name(calibration_file)
            model.calibration = LanguageCalibration.read(path, model.model_version)
            if model.calibration.languages:
                language_id.warm_up()
        return model

    def predict_raw(self, texts: list[str]) -> list[dict[str, float]]:
        """As usem3's, except toxic: the blend's, over the `windows_per_text` windows of each text that usem3
        scores most toxic (all of a short text's). The windows Gemma does not read do not count for toxic."""
        windows_per_text = [self.windows_of(text) for text in texts]
        flat = [window for windows in windows_per_text for window in windows]
        scores = TextToxicityModel.score_windows(self, flat)
        use_toxic = scores[:, self._toxic_column].copy()
        read = most_toxic_windows(use_toxic, [len(windows) for windows in windows_per_text],
                                  self._blend.windows_per_text or len(flat))
        scores[:, self._toxic_column] = -np.inf
        if len(read):
            scores[read, self._toxic_column] = self._blend.toxic(use_toxic[read],
                                                                 self._gemma.encode([flat[i] for i in read]))
        return self.worst_per_text(scores, windows_per_text)

    def score_windows(self, windows: list[str]) -> np.ndarray:
        """Every window blended (no cap): each string as one input to both encoders."""
        out = super().score_windows(windows)
        if windows:
            out[:, self._toxic_column] = self._blend.toxic(out[:, self._toxic_column], self._gemma.encode(windows))
        return out


def served_encoder_onnx(weights: str | None = None) -> str:
    """The Gemma export the served blend reads (`encoder_onnx` of `gemma-blend.json` beside the weights)."""
    return GemmaBlend.read(Path(weights or DEFAULT_WEIGHTS).with_name(BLEND_FILE)).encoder_onnx


def most_toxic_windows(toxic: np.ndarray, windows_per_text: list[int], cap: int) -> np.ndarray:
    """Indices (increasing) into the flat window list: every window of a text with at most `cap`, else the `cap`
    with the highest `toxic` (ties to the earlier window)."""
    chosen, start = [], 0
    for count in windows_per_text:
        if count <= cap:
            chosen.extend(range(start, start + count))
        else:
            order = np.argsort(-toxic[start:start + count], kind="stable")[:cap]
            chosen.extend(start + int(i) for i in order)
        start += count
    return np.array(sorted(chosen), dtype=np.int64)
