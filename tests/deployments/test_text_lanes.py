"""The TextModel's two lanes, in process: short work is never queued behind long work, and long work a caller gave
up on is dropped before it runs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from deployments import text_model
from models.text_scoring import TextRequest, TextScores
from moderation.limits import SHORT_TEXT_WORK_CHARS

pytestmark = pytest.mark.anyio
LONG = "w" * (SHORT_TEXT_WORK_CHARS + 1)


class HeldScorer:
    """Scores at once, except long texts, which wait for `release` (as long windows keep a core busy)."""

    def __init__(self):
        self.release, self.scored = threading.Event(), []

    def score(self, requests):
        if any(len(request.text) > SHORT_TEXT_WORK_CHARS for request in requests):
            assert self.release.wait(timeout=10), "never released"
        self.scored.extend(request.text[:10] for request in requests)
        return [TextScores({"toxic": 0.1}, "v1") for _ in requests]


@pytest.fixture
def replica():
    replica = text_model.TextModel.func_or_class.__new__(text_model.TextModel.func_or_class)
    replica.__init__("unused-registry")
    replica._scorer = HeldScorer()
    yield replica
    replica._scorer.release.set()


def request(text: str) -> TextRequest:
    return TextRequest(text=text, categories=("toxic",))


async def test_short_texts_are_answered_while_long_work_holds_its_lane(replica):
    held = asyncio.ensure_future(replica.score_many([request(LONG), request(LONG)]))
    await asyncio.sleep(0.05)
    # Both would wait for the held call (and fail this wait) if they shared its thread.
    alone = await asyncio.wait_for(replica.score(request("hello")), timeout=2)
    small_batch = await asyncio.wait_for(replica.score_many([request("a"), request("b")]), timeout=2)
    assert alone.categories == {"toxic": 0.1} and len(small_batch) == 2
    replica._scorer.release.set()
    assert len(await held) == 2


async def test_long_work_cancelled_while_queued_never_runs(replica):
    running = asyncio.ensure_future(replica.score_many([request(LONG)]))
    await asyncio.sleep(0.05)
    queued = asyncio.ensure_future(replica.score_many([request("q" + LONG)]))
    await asyncio.sleep(0.05)
    queued.cancel()  # its caller gave up (timeout, hang-up): Serve cancels the call on the replica
    with pytest.raises(asyncio.CancelledError):
        await queued  # the cancellation has reached the lane's queue
    replica._scorer.release.set()
    await running
    await asyncio.sleep(0.1)
    assert replica._scorer.scored == ["w" * 10]  # the cancelled one was dropped from the lane's queue
