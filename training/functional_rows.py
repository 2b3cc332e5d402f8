"""The project's written functional rows (data/functional/): each row tests one behaviour (negation, counter-speech,
implicit derogation, threats without insult words, misspellings, profanity that is not abuse, ...) in one of 11
languages.

`train/` rows train the second-stage classifier (exactly the rows the shipped one trained on, in all 11 languages);
`eval/` cases (written separately, never trained on) are its functional test suite. Neither is evidence of quality on real comments: they test rules.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from training.text_data import normalise

FUNCTIONAL_DIR = Path(__file__).resolve().parent.parent / "data" / "functional"
LANGUAGES = ("en", "ar", "nl", "fr", "de", "hi", "it", "zh", "pl", "pt", "es")
HATEFUL = ("derog_explicit", "derog_implicit", "dehumanise", "threat_direct", "threat_normative", "hate_emotion",
           "hate_negated_positive", "hate_question", "hate_opinion", "slur_hate", "profanity_hate", "spell_space",
           "spell_swap", "spell_leet", "insult_individual")
NON_HATEFUL = ("negated_hate", "counter_quote", "counter_reference", "profanity_nonhate", "abuse_object",
               "ident_neutral", "ident_positive", "reclaimed", "negative_opinion", "news_violence")
_INSULTING = {"derog_explicit", "slur_hate", "profanity_hate", "insult_individual"}
_PROFANE = {"profanity_hate", "profanity_nonhate"}
_UNKNOWN = float("nan")


@dataclass(frozen=True)
class FunctionalRow:
    language: str
    functionality: str
    label: int
    target: str
    text: str
    case_id: str = ""

    def labels(self, categories) -> list[float]:
        """The row's label per category (toxic, insult, threat, identity_attack, sexual, profanity), NaN where the
        row does not say: a functionality names what a row is, not every category it might also be."""
        hateful, f = bool(self.label), self.functionality
        known = {
            "toxic": float(hateful),
            "threat": float(f.startswith("threat_")) if hateful else 0.0,
            "identity_attack": float(self.target not in ("individual", "object", "none")) if hateful else 0.0,
            "insult": 1.0 if f in _INSULTING else (_UNKNOWN if hateful else 0.0),
            "profanity": 1.0 if f in _PROFANE else (_UNKNOWN if hateful or f == "abuse_object" else 0.0),
            "sexual": _UNKNOWN if hateful else 0.0,
        }
        return [known.get(category, _UNKNOWN) for category in categories]


def load_functional(split: str, directory: Path = FUNCTIONAL_DIR) -> list[FunctionalRow]:
    """Every row of `<directory>/<split>/*.tsv`; an eval case that repeats a train row's text is dropped from eval
    (so the suite never scores what was trained on)."""
    rows = []
    for path in sorted((directory / split).glob("*.tsv")):
        with path.open(encoding="utf-8", newline="") as f:
            for record in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                rows.append(FunctionalRow(record["language"], record["functionality"], int(record["label"]),
                                          record["target"], record["text"], record.get("case_id") or ""))
    if split == "eval":
        trained = {normalise(r.text) for r in load_functional("train", directory)}
        rows = [r for r in rows if normalise(r.text) not in trained]
    return rows
