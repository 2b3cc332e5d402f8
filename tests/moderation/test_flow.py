"""The moderation flow: charge, score, decide, queue, and give the unit back on our failures.

Against a real redis-server (quota and queue), with model backends this test controls.
"""

from __future__ import annotations

import asyncio

import pytest

from models.image_decoding import InvalidImage
from models.text_scoring import TextRequest, TextScores
from moderation import flow as flow_module
from moderation.errors import InvalidBatch, InvalidThreshold, ModelUnavailable, QuotaExceeded, ScopeNotCovered, TextTooLong
from moderation.flow import Caller, Item, ModerationFlow, TextBatch, check_texts, parse_threshold, require_scope
from policy.decisions import decide
from policy.limits import Limits
from policy.review_queue import ReviewQueue
from policy.types import ApiKey, Plan, Profile

pytestmark = pytest.mark.anyio

PROFILE = Profile(
    name="p", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8}}
)


def caller(quota: int = 10, scope: str = "both") -> Caller:
    plan = Plan(name="plan", scope=scope, monthly_quota=quota, rate_per_second=10, burst=10)
    key = ApiKey(id="key_1", account="acme", profile="p", plan="plan", created_at=0)
    return Caller(key=key, plan=plan, profile=PROFILE)


class Backends:
    def __init__(self, policy_fails: bool = False):
        self.policy_fails = policy_fails

    async def decide_many(self, items, profile, threshold):
        if self.policy_fails:
            raise ConnectionError("policy replica gone")
        return [decide(scores, profile, kind, threshold) for scores, kind in items]


@pytest.fixture
def flow(redis_client):
    return ModerationFlow(Limits(redis_client), ReviewQueue(redis_client), Backends(), inference_timeout_s=0.5)


async def no_preparation() -> None:
    return None


def text_scores(toxic: float):
    async def score(_prepared) -> TextScores:
        return TextScores(categories={"toxic": toxic}, model_version="text-1")

    return score


async def test_a_review_decision_queues_an_item_with_the_scores_and_model_version(flow):
    outcome = await flow.moderate(
        caller(), kind="text", prepare=no_preparation, score=text_scores(0.6), threshold=None, reference="c-1", image_url=None
    )
    assert outcome.decision.decision == "review"
    item = await flow.reviews.get(outcome.review_id, account="acme")
    assert (item.reason, item.kind, item.reference, item.scores, item.model_version) == (
        "model_flagged", "text", "c-1", {"toxic": 0.6}, "text-1"
    )


@pytest.mark.parametrize("toxic", [0.1, 0.9])
async def test_allow_and_block_queue_nothing(flow, toxic):
    outcome = await flow.moderate(caller(), kind="text", prepare=no_preparation, score=text_scores(toxic), threshold=None,
                                  reference=None, image_url=None)
    assert outcome.review_id is None
    assert await flow.reviews.list(account="acme") == []


async def test_every_moderation_takes_one_unit(flow):
    for _ in range(3):
        await flow.moderate(caller(), kind="text", prepare=no_preparation, score=text_scores(0.1), threshold=None,
                            reference=None, image_url=None)
    assert await flow.limits.quota_used("acme") == 3


async def test_an_exhausted_quota_refuses_before_the_model_runs(flow):
    calls = []

    async def score(_prepared):
        calls.append(1)
        return TextScores(categories={"toxic": 0.1}, model_version="text-1")

    await flow.moderate(caller(quota=1), kind="text", prepare=no_preparation, score=score, threshold=None, reference=None, image_url=None)
    with pytest.raises(QuotaExceeded):
        await flow.moderate(caller(quota=1), kind="text", prepare=no_preparation, score=score, threshold=None, reference=None, image_url=None)
    assert calls == [1]


async def test_invalid_content_found_while_preparing_gives_the_unit_back_and_keeps_its_error(flow):
    calls = []

    async def undecodable():
        raise InvalidImage("not an image")

    async def score(_prepared):
        calls.append(1)

    with pytest.raises(InvalidImage):
        await flow.moderate(caller(), kind="image", prepare=undecodable, score=score, threshold=None,
                            reference=None, image_url=None)
    assert calls == [] and await flow.limits.quota_used("acme") == 0


async def test_a_client_that_hangs_up_mid_request_keeps_its_unit_spent(flow):
    started = asyncio.Event()

    async def slow(_prepared):
        started.set()
        await asyncio.sleep(5)

    task = asyncio.create_task(flow.moderate(caller(), kind="text", prepare=no_preparation, score=slow,
                                             threshold=None, reference=None, image_url=None))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await flow.limits.quota_used("acme") == 1


async def test_the_unit_goes_back_to_the_month_it_was_taken_from(flow, monkeypatch):
    charged_at = 1_798_761_599.0  # 2026-12-31 23:59:59 UTC
    monkeypatch.setattr(flow_module.time, "time", lambda: charged_at)

    async def broken_after_midnight(_prepared):
        monkeypatch.setattr(flow_module.time, "time", lambda: charged_at + 2)  # 2027-01-01
        raise ConnectionError("replica gone")

    with pytest.raises(ModelUnavailable):
        await flow.moderate(caller(), kind="text", prepare=no_preparation, score=broken_after_midnight,
                            threshold=None, reference=None, image_url=None)
    assert await flow.limits.quota_used("acme", now=charged_at) == 0
    assert await flow.limits.quota_used("acme", now=charged_at + 2) == 0


async def test_a_failing_model_is_model_unavailable_and_gives_the_unit_back(flow):
    async def broken(_prepared):
        raise ConnectionError("replica gone")

    with pytest.raises(ModelUnavailable):
        await flow.moderate(caller(), kind="text", prepare=no_preparation, score=broken, threshold=None, reference=None, image_url=None)
    assert await flow.limits.quota_used("acme") == 0


async def test_a_model_past_the_timeout_is_model_unavailable_and_gives_the_unit_back(flow):
    async def slow(_prepared):
        await asyncio.sleep(5)

    with pytest.raises(ModelUnavailable):
        await flow.moderate(caller(), kind="text", prepare=no_preparation, score=slow, threshold=None, reference=None, image_url=None)
    assert await flow.limits.quota_used("acme") == 0


async def test_a_failing_policy_decides_nothing_and_gives_the_unit_back(redis_client):
    flow = ModerationFlow(Limits(redis_client), ReviewQueue(redis_client), Backends(policy_fails=True), 0.5)
    with pytest.raises(ModelUnavailable, match="policy"):
        await flow.moderate(caller(), kind="text", prepare=no_preparation, score=text_scores(0.6), threshold=None,
                            reference=None, image_url=None)
    assert await flow.limits.quota_used("acme") == 0
    assert await flow.reviews.list(account="acme") == []


async def test_a_threshold_override_makes_the_decision_binary(flow):
    outcome = await flow.moderate(caller(), kind="text", prepare=no_preparation, score=text_scores(0.6), threshold=0.7,
                                  reference=None, image_url=None)
    assert (outcome.decision.decision, outcome.decision.threshold, outcome.review_id) == ("allow", 0.7, None)


@pytest.mark.parametrize(("raw", "expected"), [(None, None), ("0", 0.0), ("0.35", 0.35), ("1", 1.0)])
def test_threshold_accepts_numbers_from_0_to_1(raw, expected):
    assert parse_threshold(raw) == expected


@pytest.mark.parametrize("raw", ["-0.1", "1.01", "nan", "NaN", "inf", "abc", ""])
def test_threshold_refuses_anything_else(raw):
    with pytest.raises(InvalidThreshold):
        parse_threshold(raw)


def test_a_plan_covers_only_its_scope():
    require_scope(caller(scope="text").plan, "text")
    with pytest.raises(ScopeNotCovered, match="image"):
        require_scope(caller(scope="text").plan, "image")


def text_item(toxic: float, reference: str | None = None) -> Item:
    return Item(kind="text", prepare=no_preparation, score=text_scores(toxic), reference=reference)


async def test_a_batch_takes_one_unit_per_item_and_queues_each_review_on_its_own(flow):
    outcomes = await flow.moderate_many(caller(), [text_item(0.1), text_item(0.6, "r-1"), text_item(0.6, "r-2")])
    assert [o.decision.decision for o in outcomes] == ["allow", "review", "review"]
    assert [(await flow.reviews.get(o.review_id)).reference for o in outcomes[1:]] == ["r-1", "r-2"]
    assert await flow.limits.quota_used("acme") == 3


async def test_a_batch_larger_than_the_quota_left_takes_nothing(flow):
    await flow.moderate_many(caller(quota=4), [text_item(0.1)] * 2)
    with pytest.raises(QuotaExceeded):
        await flow.moderate_many(caller(quota=4), [text_item(0.1)] * 3)
    assert await flow.limits.quota_used("acme") == 2


async def test_one_failing_item_fails_the_batch_gives_every_unit_back_and_queues_nothing(flow):
    async def broken(_prepared):
        raise ConnectionError("replica gone")

    items = [text_item(0.6), Item(kind="text", prepare=no_preparation, score=broken), text_item(0.6)]
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), items)
    assert await flow.limits.quota_used("acme") == 0
    assert await flow.reviews.list(account="acme") == []


async def test_batch_items_are_scored_concurrently_but_bounded(flow):
    running, peak = 0, 0

    async def score(_prepared):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return TextScores(categories={"toxic": 0.1}, model_version="text-1")

    await flow.moderate_many(caller(quota=100), [Item(kind="text", prepare=no_preparation, score=score)] * 40)
    assert peak == flow_module.ITEMS_IN_FLIGHT


def test_check_texts_holds_the_batch_limits():
    plan = caller().plan.model_copy(update={"text_max_chars": 5})
    check_texts(["x" * 5] * 10, plan)
    for texts, error in (([], InvalidBatch), (["x"] * 101, InvalidBatch), (["x" * 6], TextTooLong),
                         (["x" * 5] * 11, TextTooLong)):
        with pytest.raises(error):
            check_texts(texts, plan)


async def test_a_request_of_many_items_is_decided_in_one_policy_call(redis_client):
    class CountingBackends(Backends):
        calls = 0

        async def decide_many(self, items, profile, threshold):
            CountingBackends.calls += 1
            return await super().decide_many(items, profile, threshold)

    flow = ModerationFlow(Limits(redis_client), ReviewQueue(redis_client), CountingBackends(), 0.5)
    items = [Item(kind="text", prepare=no_preparation, score=text_scores(t)) for t in (0.1, 0.6, 0.9)]
    outcomes = await flow.moderate_many(caller(), items)
    assert [o.decision.decision for o in outcomes] == ["allow", "review", "block"]
    assert CountingBackends.calls == 1


async def test_the_texts_of_a_batch_go_to_the_model_in_one_call():
    calls = []

    async def score_texts(requests):
        calls.append([r.text for r in requests])
        await asyncio.sleep(0.01)
        return [TextScores(categories={"toxic": len(r.text) / 10}, model_version="v") for r in requests]

    batch = TextBatch(score_texts)
    requests = [TextRequest(text, ("toxic",)) for text in ("a", "bb", "ccc")]
    scorers = [batch.scorer(request) for request in requests]
    scores = await asyncio.gather(*(score(request) for score, request in zip(scorers, requests)))
    assert calls == [["a", "bb", "ccc"]]
    assert [s.categories["toxic"] for s in scores] == [0.1, 0.2, 0.3]


async def test_one_cancelled_item_does_not_cancel_the_call_the_others_wait_on():
    release = asyncio.Event()

    async def score_texts(requests):
        await release.wait()
        return [TextScores(categories={"toxic": 0.5}, model_version="v") for _ in requests]

    batch = TextBatch(score_texts)
    first, second = (batch.scorer(TextRequest(t, ("toxic",))) for t in ("a", "b"))
    cancelled = asyncio.ensure_future(first(None))
    waiting = asyncio.ensure_future(second(None))
    await asyncio.sleep(0)
    cancelled.cancel()
    release.set()
    assert (await waiting).categories == {"toxic": 0.5}
