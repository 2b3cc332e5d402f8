"""Each site's refits against a real store: the background loop refits an account once its labels settle, one
account's refit reads only its own labels, a reset erases both, and a backtest counts a text another category flags
as flagged at every toxic threshold (moderation/site_adaptation.py)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from adaptation.labels import Label
from moderation.site_adaptation import SiteAdaptation, label_scores, refit_due_accounts
from policy.types import Profile
from store.keys.config import ConfigStore
from store.labels.corrections import CorrectionStore
from store.labels.labels import LabelStore

pytestmark = pytest.mark.anyio

PROFILE = Profile(name="site", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                           "toxic": {"review": 0.5, "block": 0.8},
                                                           "insult": {"review": 0.3, "block": 0.9}})


def _report(harmful: bool, at: float, insult: float = 0.0, encoder: str = "enc-1") -> Label:
    embedding = np.random.default_rng(int(at * 1000) % 2**32).normal(size=512).astype(np.float32)
    return Label(embedding, 0.0, harmful, "report", 1.0, "en", at, "site", {"insult": insult}, encoder)


@pytest.fixture
def site(redis_client) -> SiteAdaptation:
    return SiteAdaptation(LabelStore(redis_client), CorrectionStore(redis_client), ConfigStore(redis_client))


async def test_the_background_loop_refits_an_account_once_its_labels_settle(site):
    await site.labels.add_reported("site-a", _report(True, time.time()))
    stop = asyncio.Event()
    loop = asyncio.create_task(refit_due_accounts(site, stop, every_s=0.05, settle_s=0.0))
    try:
        for _ in range(100):
            if await site.corrections.get("site-a") is not None:
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await loop
    status = await site.status("site-a")
    assert status["examples"] == 1 and status["active"] is False and status["reason"]
    assert await site.labels.due(time.time()) == []


async def test_an_accounts_refit_reads_only_its_own_labels(site):
    for i in range(3):
        await site.labels.add_reported("site-a", _report(i % 2 == 0, 100.0 + i))
    await site.labels.add_reported("site-b", _report(True, 200.0))
    assert (await site.refit("site-b"))["examples"] == 1
    assert (await site.refit("site-a"))["examples"] == 3


async def test_reset_erases_the_labels_and_the_fit(site):
    await site.labels.add_reported("site-a", _report(True, 100.0))
    await site.refit("site-a")
    await site.reset("site-a")
    status = await site.status("site-a")
    assert status["reason"] == "Not fitted yet." and status["labels"] == {"decided": 0, "reported": 0}


def test_a_text_another_category_flags_counts_as_flagged_at_any_toxic_threshold():
    labels = [_report(False, 1.0, insult=0.2), _report(False, 2.0, insult=0.35)]
    scores = label_scores(labels, PROFILE, None)
    assert scores[0] == pytest.approx(0.5) and scores[1] == 1.0  # served toxic 0.5 (logit 0); insult 0.35 >= 0.3
