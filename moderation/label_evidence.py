"""What a queued or reported text keeps so that it can become a label of its account (adaptation/labels.py): the
served encoder's embedding of the text, its served scores (before any correction of the account's), how it was seen
and the chance of that. Never the text."""

from __future__ import annotations

import json

from adaptation.labels import Seen, evidence_document
from models.text_scoring import TOXIC, TextScores


def label_evidence(scored: object, seen: Seen, sampling_rate: float, profile: str) -> str | None:
    """A text answer's label evidence as JSON (adaptation/labels.py), on the served score before any correction;
    None for an image or a text whose model gave no embedding."""
    fields = evidence_fields(scored, seen, sampling_rate, profile)
    return json.dumps(fields) if fields is not None else None


def evidence_fields(scored: object, seen: Seen, sampling_rate: float, profile: str) -> dict | None:
    if not isinstance(scored, TextScores) or scored.evidence is None or TOXIC not in scored.categories:
        return None
    served = scored.uncorrected_toxic if scored.uncorrected_toxic is not None else scored.categories[TOXIC]
    others = {name: round(score, 6) for name, score in scored.categories.items() if name != TOXIC}
    return evidence_document(scored.evidence.embedding, served, seen=seen, sampling_rate=sampling_rate,
                             language=scored.evidence.language, profile=profile, scores=others,
                             encoder=scored.evidence.encoder)
