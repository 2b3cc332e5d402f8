"""The card's "Data" section: the sources and their licences, the split, what the labels mean."""

from __future__ import annotations


LICENCES = [
    ("en", "Toxic Spans (Civil Comments subset), SemEval-2021 train + trial", "CC0 1.0", "positives only"),
    ("en", "Davidson et al. 2017, hate speech and offensive language", "MIT", ""),
    ("en", "Stormfront hate speech (de Gibert et al. 2018), without the authors' test sample", "CC BY-SA 3.0 ES", ""),
    ("en", "MLMA hate speech, English (Ousidhoum et al. 2019)", "MIT", ""),
    ("en", "ConvAbuse (Cercas Curry et al. 2021), train + valid", "CC BY 4.0", "only source of `sexual`"),
    ("de", "GermEval 2018, training set", "CC BY 4.0", ""),
    ("es", "Gold Standard for Toxicity and Incivility (González-Bustamante & Rivera 2024)", "CC BY 4.0", ""),
    ("pt", "ToLD-Br, train + validation", "CC BY-SA 4.0", ""),
    ("tr", "OffensEval 2020 Turkish, training set", "CC BY 2.0", "OFF includes untargeted profanity"),
    ("ar", "MLMA hate speech, Arabic", "MIT", "keyword-sampled: hard negatives"),
    ("zh", "COLD, train + dev", "Apache-2.0", "no fine labels"),
    ("ko", "Korean HateSpeech (kocohub), train + dev", "CC BY-SA 4.0", ""),
    ("ko", "K-MHaS, validation", "CC BY-SA 4.0", ""),
    ("da", "DKHate (OffensEval 2020 Danish), training set", "CC BY 4.0", "OFF includes untargeted swearing"),
]


def data_section(report) -> str:
    sources = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in LICENCES)
    return f"""## Data

A directory of `<lang>.jsonl` files (format in docs/text-model.md), named by `MODERATION_TEXT_DATA_DIR`; not
shipped in this repository. All rows are real, human-labelled public data from train/dev/validation splits (the
sources' own test splits and a separate external evaluation set were excluded row by row when the corpus was built).

| lang | dataset | licence | note |
|---|---|---|---|
{sources}

**Split:** each comment goes to train (80%), dev (10%) or test (10%) by a hash of its normalised text
(`training/text_data.py`), so every (language, source) is split the same way on every machine. Dev chose the epoch,
the learning rate and the thresholds; test is only reported on. Rows: train {report['rows']['train']}, dev
{report['rows']['dev']}, test {report['rows']['test']}.

**Label meanings differ:** Danish (DKHate) and Turkish (OffensEval) count untargeted swearing as offensive
(DKHate labels "Det er fandme de bedste nyheder idag" offensive); English Davidson "offensive" is dominated by slurs in AAE tweets; Stormfront, MLMA
and K-MHaS label hate (group-targeted); ConvAbuse labels abuse towards a chatbot; Civil Comments (Toxic Spans) holds
positives only, so English negatives come from other domains (see weaknesses).

"""
