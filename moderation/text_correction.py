"""Each account's live correction of the served text score, applied in the flow. Every part of the correction, its
fit included: adaptation/correction.py.

The ingress reads an account's last fit from the store (`CorrectionStore`) at most every `fresh_s` seconds and keeps
the parsed correction, so applying it costs a dot product of 512 numbers, not a store call. A correction applies
only to answers whose embedding the encoder it was fitted on made: after a swap of the text model, none, until the
new model's labels refit it. A fit that is not live
(`active` false), or one the store cannot give right now, leaves the served score as it is: the correction is a
refinement, never a reason to fail a request. A corrected answer says so in `model_version` (`+ad<hash>`) and keeps
the served score (`uncorrected_toxic`), on which every later fit is made.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from adaptation.correction import Correction
from models.text_scoring import TOXIC, TextScores
from store.labels.corrections import CorrectionStore

log = logging.getLogger("moderation.text_correction")

FRESH_S = 5.0  # how long a replica keeps an account's correction before it reads the store again


class AccountCorrections:
    def __init__(self, store: CorrectionStore, fresh_s: float = FRESH_S, clock=time.monotonic):
        self._store, self.fresh_s, self._clock = store, fresh_s, clock
        self._kept: dict[str, tuple[float, LiveCorrection | None]] = {}

    async def live(self, account: str) -> LiveCorrection | None:
        now = self._clock()
        kept = self._kept.get(account)
        if kept is not None and now - kept[0] < self.fresh_s:
            return kept[1]
        try:
            document = await self._store.get(account)
            correction = LiveCorrection(Correction.from_document(document["correction"]), document.get("encoder", "")) \
                if document and document.get("active") and document.get("correction") else None
        except Exception as exc:  # the store or a record we cannot read: serve the served score
            log.warning("no correction for %s this time: %s", account, type(exc).__name__)
            correction = kept[1] if kept else None
        self._kept[account] = (now, correction)
        return correction

    def forget(self, account: str) -> None:
        self._kept.pop(account, None)


@dataclass(frozen=True)
class LiveCorrection:
    correction: Correction
    encoder: str  # the text model whose embeddings it was fitted on


def corrected(scores: TextScores, live: LiveCorrection) -> TextScores:
    """The answer with its toxic score corrected; unchanged when the model gave no embedding for it, or one another
    encoder made."""
    if scores.evidence is None or TOXIC not in scores.categories or scores.evidence.encoder != live.encoder:
        return scores
    correction, served = live.correction, scores.categories[TOXIC]
    return replace(
        scores,
        categories={**scores.categories, TOXIC: correction.score(served, scores.evidence.embedding)},
        model_version=f"{scores.model_version}+{correction.version}",
        uncorrected_toxic=served,
    )
