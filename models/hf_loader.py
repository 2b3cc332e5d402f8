"""Any local Hugging Face classifier directory as a model: text (sequence classification) or image.

Loading is offline (``local_files_only=True``): ``weights`` is a directory written by ``save_pretrained``.
The registry entry's ``labels`` option maps each output category to the model's label names
(``config.id2label``) whose probabilities add up to that category's score. Probabilities are a softmax over
the labels, or one sigmoid per label when ``config.problem_type == "multi_label_classification"``.

Text longer than the model's window is scored in overlapping windows and each category keeps its worst
(highest) window: the service promises that a harmful passage counts wherever it sits in the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import (
    AutoImageProcessor,
    AutoModelForImageClassification,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PretrainedConfig,
)

# Tokenizers without a declared limit report this huge sentinel as `model_max_length`.
_UNSET_MAX_LENGTH = 1_000_000


class LabelMapping:
    """Turns classifier logits into ``{category: probability}`` by summing the mapped labels' probabilities."""

    def __init__(self, label_ids: dict[str, list[int]], multi_label: bool) -> None:
        self.categories = list(label_ids)
        self._label_ids = label_ids
        self._multi_label = multi_label

    @classmethod
    def from_config(cls, config: PretrainedConfig, labels: dict[str, list[str]], weights: str) -> LabelMapping:
        """Checks every mapped label against ``config.id2label``, so a typo fails at load, not at predict."""
        if not labels:
            raise ValueError(f"{weights}: the `labels` option maps no category")
        id_of = {name: int(index) for index, name in config.id2label.items()}
        label_ids: dict[str, list[int]] = {}
        for category, names in labels.items():
            if isinstance(names, str) or not names:
                raise ValueError(f"{weights}: category {category!r} must map to a non-empty list of label names")
            unknown = [name for name in names if name not in id_of]
            if unknown:
                raise ValueError(
                    f"{weights}: category {category!r} maps to {unknown}, which the model does not have "
                    f"(its labels, from config.id2label: {sorted(id_of)})"
                )
            label_ids[category] = [id_of[name] for name in names]
        return cls(label_ids, config.problem_type == "multi_label_classification")

    def scores(self, logits: torch.Tensor) -> list[dict[str, float]]:
        logits = logits.float()
        probabilities = logits.sigmoid() if self._multi_label else logits.softmax(dim=-1)
        # Capped: independent sigmoids of several labels can sum past 1, and thresholds live in [0, 1].
        columns = [probabilities[:, ids].sum(dim=-1).clamp(max=1.0) for ids in self._label_ids.values()]
        return [dict(zip(self.categories, row)) for row in torch.stack(columns, dim=-1).tolist()]


def _model_directory(weights: str | None) -> str:
    if weights is None or not Path(weights).is_dir():
        raise ValueError(f"a transformers model needs `weights` set to a local model directory, got {weights!r}")
    return weights


def _load_classifier(auto_class: Any, weights: str) -> Any:
    # Each replica owns one core; more threads only contend with the other replicas.
    torch.set_num_threads(1)
    model = auto_class.from_pretrained(weights, local_files_only=True)
    model.eval()
    return model


class TransformersTextModel:
    """Scores texts as ``{category: p}`` with a sequence-classification model."""

    def __init__(self, tokenizer: Any, model: Any, labels: LabelMapping, window: int, batch_size: int) -> None:
        self._tokenizer = tokenizer
        self._model = model
        self._labels = labels
        self._window = window
        # Consecutive windows overlap by a quarter, so a phrase cut by one window's edge lies whole in the next.
        self._stride = window // 4
        self._batch_size = batch_size

    @classmethod
    def load(
        cls,
        weights: str | None,
        *,
        labels: dict[str, list[str]],
        max_length: int | None = None,
        batch_size: int = 16,
    ) -> TransformersTextModel:
        directory = _model_directory(weights)
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        if not tokenizer.is_fast:
            raise ValueError(f"{directory}: windowing long texts needs a fast (Rust `tokenizers`) tokenizer")
        model = _load_classifier(AutoModelForSequenceClassification, directory)
        mapping = LabelMapping.from_config(model.config, labels, directory)
        return cls(tokenizer, model, mapping, cls._window_length(tokenizer, model.config, max_length), batch_size)

    @staticmethod
    def _window_length(tokenizer: Any, config: PretrainedConfig, max_length: int | None) -> int:
        """The explicit option, else the tokenizer's declared limit, else the model's position embeddings."""
        window = max_length
        if window is None and tokenizer.model_max_length < _UNSET_MAX_LENGTH:
            window = tokenizer.model_max_length
        if window is None:
            window = getattr(config, "max_position_embeddings", None)
        if window is None or window <= tokenizer.num_special_tokens_to_add():
            raise ValueError(f"no usable window length ({window!r}): set the `max_length` option")
        return window

    @torch.inference_mode()
    def predict(self, texts: list[str]) -> list[dict[str, float]]:
        scores: list[dict[str, float]] = []
        for start in range(0, len(texts), self._batch_size):
            scores.extend(self._worst_windows(texts[start : start + self._batch_size]))
        return scores

    def _worst_windows(self, texts: list[str]) -> list[dict[str, float]]:
        encoded = self._tokenizer(
            texts,
            truncation=True,
            max_length=self._window,
            stride=self._stride,
            return_overflowing_tokens=True,
            padding=True,
            return_tensors="pt",
        )
        text_of_window = encoded.pop("overflow_to_sample_mapping").tolist()
        window_scores: list[dict[str, float]] = []
        for start in range(0, len(text_of_window), self._batch_size):
            chunk = {name: tensor[start : start + self._batch_size] for name, tensor in encoded.items()}
            window_scores.extend(self._labels.scores(self._model(**chunk).logits))
        worst: list[dict[str, float] | None] = [None] * len(texts)
        for index, window in zip(text_of_window, window_scores):
            previous = worst[index]
            worst[index] = window if previous is None else {c: max(p, previous[c]) for c, p in window.items()}
        return worst  # type: ignore[return-value]  # every text has at least one window


class TransformersImageModel:
    """Scores frames as ``{category: p}`` with an image-classification model; always reports ``safe``."""

    def __init__(self, processor: Any, model: Any, labels: LabelMapping, batch_size: int) -> None:
        self._processor = processor
        self._model = model
        self._labels = labels
        self._batch_size = batch_size

    @classmethod
    def load(
        cls, weights: str | None, *, labels: dict[str, list[str]], batch_size: int = 8
    ) -> TransformersImageModel:
        directory = _model_directory(weights)
        # The PIL backend: the torchvision one would need torchvision, which must not be installed (it pulls a CUDA torch).
        processor = AutoImageProcessor.from_pretrained(directory, local_files_only=True, backend="pil")
        model = _load_classifier(AutoModelForImageClassification, directory)
        return cls(processor, model, LabelMapping.from_config(model.config, labels, directory), batch_size)

    def predict(self, frames: list[Image.Image]) -> list[dict[str, float]]:
        return self.run([self.prepare(frame) for frame in frames])

    def prepare(self, frame: Image.Image) -> np.ndarray:
        """One frame as the model's pixel values: the processor's image work, done before the batch."""
        return self._processor(images=[frame.convert("RGB")], return_tensors="np")["pixel_values"][0]

    @torch.inference_mode()
    def run(self, inputs: list[np.ndarray]) -> list[dict[str, float]]:
        scores: list[dict[str, float]] = []
        for start in range(0, len(inputs), self._batch_size):
            pixels = torch.from_numpy(np.stack(inputs[start : start + self._batch_size]))
            scores.extend(self._labels.scores(self._model(pixel_values=pixels).logits))
        if "nsfw" in self._labels.categories and "safe" not in self._labels.categories:
            for score in scores:
                score["safe"] = 1.0 - score["nsfw"]
        return scores
