"""Real labelled comments for the text model, and the hand-written rule-test rows.

Real data: a directory of `<lang>.jsonl` files in the format documented in docs/text-model.md, named by the
environment variable `MODERATION_TEXT_DATA_DIR` (there is no default: the data stays outside the repository).
Each row is `{"text", "label", "lang", "source", "orig_label"}` plus, for positive rows, optional booleans
`insult`, `threat`, `identity_attack`, `sexual`, `profanity`, `severe`; a missing key means unknown.
Negative rows (`label == 0`) count as false for every fine label.

Split: every row goes to train (80%), dev (10%, thresholds and epoch choice) or test (10%, held-out evaluation) by
a hash of its normalised text, so the split is deterministic, the same for every run and machine, stratified by
nothing but still even within each (language, source), and a text repeated across sources lands on one side only.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
HANDWRITTEN_DIR = REPO_ROOT / "data" / "text"
DATA_DIR_ENV = "MODERATION_TEXT_DATA_DIR"
FINE_LABELS = ("insult", "threat", "identity_attack", "sexual", "profanity")
SPLITS = ("train", "dev", "test")

# Source names carry the source's own split ("-train", "-dev", ...) or sub-collection; LOSO leaves out a whole
# dataset, so those are folded into one dataset name.
_DATASET_RULES = [
    (re.compile(r"^convabuse.*"), "convabuse"),
    (re.compile(r"^gold-standard-toxicity-es.*"), "gold-standard-toxicity-es"),
    (re.compile(r"^korean-hate-speech\(kocohub\).*"), "korean-hate-speech(kocohub)"),
    (re.compile(r"^told-br.*"), "told-br"),
    (re.compile(r"^cold-.*"), "cold"),
]


@dataclass(frozen=True)
class Comment:
    text: str
    label: int
    lang: str
    source: str
    fine: dict = field(default_factory=dict)  # category -> bool, known labels only
    orig_label: str = ""  # the source's own label, as given

    @property
    def dataset(self) -> str:
        return dataset_of(self.source)

    @property
    def split(self) -> str:
        return split_of(self.text)

    def known(self, category: str) -> bool | None:
        """True/False where the label is known, None where it is not (negatives are false for every category)."""
        if category == "toxic":
            return bool(self.label)
        if not self.label:
            return False
        return self.fine.get(category)


def dataset_of(source: str) -> str:
    for pattern, name in _DATASET_RULES:
        if pattern.match(source):
            return name
    return source


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


def split_of(text: str) -> str:
    bucket = int(hashlib.sha1(normalise(text).encode("utf-8")).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else "dev" if bucket < 90 else "test"


def data_dir() -> Path | None:
    """The real-data directory, or None when the setting is unset or names no directory."""
    value = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(value) if value and Path(value).is_dir() else None


def load_comments(directory: Path | None = None, splits=SPLITS) -> list[Comment]:
    directory = directory or data_dir()
    if directory is None:
        raise SystemExit(f"set {DATA_DIR_ENV} to a directory of <lang>.jsonl files (see docs/text-model.md)")
    comments = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                comment = Comment(row["text"], int(row["label"]), row["lang"], row["source"],
                                  {k: bool(row[k]) for k in FINE_LABELS if k in row}, row.get("orig_label", ""))
                if comment.split in splits:
                    comments.append(comment)
    return comments


@dataclass(frozen=True)
class HandwrittenRow:
    text: str
    label: int
    language: str
    kind: str


def load_handwritten(splits=("train", "eval")) -> list[HandwrittenRow]:
    """The project's hand-written rows (data/text/*.tsv): a rule test, never a headline figure. Rows marked
    `train` may be training rows (the side heads use them); `eval` rows are never trained on."""
    rows = []
    for path in sorted(HANDWRITTEN_DIR.glob("*.tsv")):
        with path.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if row["split"] in splits:
                    rows.append(HandwrittenRow(row["text"], int(row["label"]), row["language"], row["kind"]))
    return rows


def load_handwritten_split(split: str) -> list[HandwrittenRow]:
    return load_handwritten(splits=(split,))
