"""Each site's own line, from its labels: the refit of its correction, its threshold backtest, and the background
refits as labels arrive. Store reads and writes here; the fitting and estimating are pure (adaptation/).

- **Refit** (`SiteAdaptation.refit`): every kept label of the account (store/labels/labels.py) goes into
  `adaptation.correction.fit_correction`; the fit, live or not and why, replaces the last one in one write
  (store/labels/corrections.py), which the ingress replicas read within seconds (moderation/text_correction.py). It
  runs in a worker thread: a refit of 10,000 labels is about a second of CPU that must not stall the admin API.
- **Backtest** (`SiteAdaptation.backtest`): each label's text as the profile would now flag it, on toxic's score
  (with the live correction; out of fold: each text scored by a correction fitted without it, since on the labels it
  was fitted on a correction looks better than it is), estimated by `adaptation.backtest.backtest` against the
  profile's toxic thresholds and its `target_benign_flagged`. A text another enabled category flags by itself (say
  insult, at its own review threshold) counts as flagged at every toxic threshold: the suggestion moves toxic's
  thresholds only, and says what they do beside the others as they stand.
- **Applying** the suggested thresholds (`apply_suggested_thresholds`) writes them as toxic's; the admin API logs
  it as one audited action. A profile is shared by every key pinned to it: give each site its own profile first.
- **Background refits** (`refit_due_accounts`): an account whose first new label is `settle_s` old is refitted; one
  account's refit never reads another's labels.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from adaptation.backtest import Backtest, backtest
from adaptation.correction import Correction, fit_correction
from adaptation.labels import Label
from policy.types import PRIMARY_CATEGORIES, Profile
from store.keys.config import ConfigStore
from store.labels.corrections import CorrectionStore
from store.labels.labels import LabelStore

log = logging.getLogger("moderation.site_adaptation")
TOXIC = PRIMARY_CATEGORIES["text"]
REFIT_SETTLE_S = 60.0  # a burst of decisions becomes one refit: the first new label must be this old
REFIT_EVERY_S = 30.0


class NoSuchProfile(LookupError):
    pass


class NoSuggestion(Exception):
    """The backtest could not suggest thresholds (its reason says why)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SiteAdaptation:
    def __init__(self, labels: LabelStore, corrections: CorrectionStore, config: ConfigStore):
        self.labels, self.corrections, self.config = labels, corrections, config

    async def refit(self, account: str, profile_name: str | None = None, now: float | None = None) -> dict:
        """Fit, store and answer the account's new fit, with the backtest of `profile_name` (default: the profile
        that served most of its labels) on the scores it now gives."""
        await self.labels.take_due(account)
        labels, encoder = of_the_newest_encoder(await self.labels.labels(account))
        report = await asyncio.to_thread(fit_correction, labels)
        status = {"account": account, "version": report.correction.version if report.correction else None,
                  **report.document(), "encoder": encoder, "fitted_at": time.time() if now is None else now,
                  "labels": await self.labels.counts(account)}  # fmt: skip
        await self.corrections.put(account, status)
        profile = await self._profile(profile_name or _most_used_profile(labels))
        live = report.correction if report.active else None
        found = await asyncio.to_thread(_backtest, labels, profile, live, report.out_of_fold) if profile else None
        return {**_public(status), "backtest": found.document() if found else None,
                "profile": profile.name if profile else None}

    async def status(self, account: str) -> dict:
        """The account's last fit (without its weights), or what there is before any: the label counts."""
        status = await self.corrections.get(account)
        counts = await self.labels.counts(account)
        if status is None:
            return {"account": account, "active": False, "version": None, "reason": "Not fitted yet.",
                    "examples": 0, "labels": counts}  # fmt: skip
        return {**_public(status), "labels": counts}

    async def reset(self, account: str) -> None:
        """Erases the account's labels and its fit: its answers go back to the served score within seconds."""
        await self.labels.erase(account)
        await self.corrections.erase(account)

    async def backtest(self, account: str, profile_name: str) -> Backtest:
        profile = await self._profile(profile_name)
        if profile is None:
            raise NoSuchProfile(profile_name)
        labels, _ = of_the_newest_encoder(await self.labels.labels(account))
        # 10,000 labels are a few hundred ms of scoring: off the event loop, as the refit
        return await asyncio.to_thread(_backtest, labels, profile, await self._live(account))

    async def apply_suggested_thresholds(self, account: str, profile_name: str) -> Profile:
        found = await self.backtest(account, profile_name)
        if found.suggested_thresholds is None:
            raise NoSuggestion(found.reason or "The backtest suggests no thresholds.")
        profile = await self._profile(profile_name)
        toxic = profile.categories[TOXIC].model_copy(update=found.suggested_thresholds)
        moved = profile.model_copy(update={"categories": {**profile.categories, TOXIC: toxic}})
        await self.config.put_profile(moved)
        return moved

    async def _live(self, account: str) -> Correction | None:
        status = await self.corrections.get(account)
        if not status or not status.get("active") or not status.get("correction"):
            return None
        return Correction.from_document(status["correction"])

    async def _profile(self, name: str | None) -> Profile | None:
        return await self.config.get_profile(name) if name else None


def label_scores(labels: Sequence[Label], profile: Profile, live: Correction | None,
                 held_out: np.ndarray | None = None) -> np.ndarray:
    """Each label's text as `profile` would now flag it: its toxic score (with the live correction, out of fold:
    `held_out` logits from the fit's check, else a check run now), or 1.0 when another enabled text category reaches
    its own review threshold (flagged whatever toxic's)."""
    toxic = np.array([label.served_score for label in labels])
    if live is not None and labels:
        held_out = fit_correction(labels).out_of_fold if held_out is None else held_out
        in_sample = np.array([live.score(label.served_score, label.embedding) for label in labels])
        toxic = in_sample if held_out is None else np.where(np.isnan(held_out), in_sample, _sigmoid(held_out))
    others = [c for c in profile.enabled_categories("text") if c != TOXIC]
    flagged_by_others = np.array([any(label.scores.get(c, 0.0) >= profile.categories[c].review for c in others)
                                  for label in labels], dtype=bool)  # fmt: skip
    return np.where(flagged_by_others, 1.0, toxic)


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -50, 50)))


def _backtest(labels: Sequence[Label], profile: Profile, correction: Correction | None,
              held_out: np.ndarray | None = None) -> Backtest:
    limits = profile.categories[TOXIC]
    return backtest(label_scores(labels, profile, correction, held_out), labels, review=limits.review,
                    block=limits.block, target_benign_flagged=profile.target_benign_flagged)


def of_the_newest_encoder(labels: list[Label]) -> tuple[list[Label], str]:
    """The labels whose embeddings the newest label's encoder made, and that encoder: after a swap of the text
    model, the old model's labels are kept (a swap back finds them) but fitted on no more, and a correction fitted on
    them is applied to no answer of the new one (moderation/text_correction.py)."""
    if not labels:
        return [], ""
    encoder = max(labels, key=lambda label: label.at).encoder
    return [label for label in labels if label.encoder == encoder], encoder


def _most_used_profile(labels: Sequence[Label]) -> str | None:
    named = Counter(label.profile for label in labels if label.profile)
    return named.most_common(1)[0][0] if named else None


def _public(status: dict) -> dict:
    """A fit's status without its weights (a few KB of base64 no reader needs)."""
    return {name: value for name, value in status.items() if name != "correction"}


async def refit_due_accounts(site: SiteAdaptation, stop: asyncio.Event, *, every_s: float = REFIT_EVERY_S,
                             settle_s: float = REFIT_SETTLE_S) -> None:
    """Until `stop`: every `every_s`, refit each account whose first label since its last fit is `settle_s` old."""
    while not stop.is_set():
        try:
            for account in await site.labels.due(time.time() - settle_s):
                await site.refit(account)
        except Exception as exc:  # the store is down: try again next round
            log.warning("background refit failed: %s", type(exc).__name__)
        try:
            await asyncio.wait_for(stop.wait(), timeout=every_s)
        except asyncio.TimeoutError:
            pass
