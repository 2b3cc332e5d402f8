"""The moderation flow: charge, score, decide, queue, and give the units back on failures.

Against a real redis-server (quota and queue), with model backends this test controls: they fail where production's
fail (a model call raising, the image decoder refusing an upload on the model side).
"""

from __future__ import annotations

import asyncio

import pytest

from models.decision_route import DECIDES_NOTHING, CategoryLimits
from models.image_decoding import InvalidImage
from models.image_scoring import ImageScores
from models.image_upload import ScoredImage
from models.text_scoring import TextScores
from moderation import flow as flow_module
from moderation.model_gates import GateRules, ModelGates
from moderation.errors import ModelUnavailable, Overloaded, QuotaExceeded, TooManyInFlight
from moderation.flow import Caller, ModerationFlow
from moderation.items import Item, image_item, text_item
from moderation.limits import SHORT_TEXT_WORK_CHARS
from policy.decisions import decide
from store.keys.quota import QuotaStore
from store.review.queue import ReviewQueue
from policy.types import ApiKey, Plan, Profile

pytestmark = pytest.mark.anyio

PROFILE = Profile(
    name="p", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8}}
)


def caller(quota: int = 10, max_in_flight: int = 32) -> Caller:
    plan = Plan(name="plan", scope="both", monthly_quota=quota, rate_per_second=10, burst=10,
                max_in_flight=max_in_flight)  # fmt: skip
    key = ApiKey(id="key_1", account="acme", profile="p", plan="plan", created_at=0)
    return Caller(key=key, plan=plan, profile=PROFILE)


def text(content: str = "hello", **where: str) -> Item:
    return text_item(PROFILE, content, **where)


def image(data: bytes = b"upload") -> Item:
    return image_item(caller().plan, PROFILE, data)


class Backends:
    """The model side as the flow sees it: toxic scores by text (0.1 otherwise), calls recorded; a text call takes
    `delay_s`, then runs `on_answer` and raises `failure` when set; an upload raises `image_failure` when set."""

    def __init__(self, toxic: dict[str, float] | None = None, failure: Exception | None = None, delay_s: float = 0.0):
        self.toxic, self.failure, self.delay_s = toxic or {}, failure, delay_s
        self.image_failure: Exception | None = None
        self.policy_fails = False
        self.on_answer = lambda: None
        self.calls: list[tuple[str, list[str]]] = []
        self.requests: list = []  # every TextRequest the model was asked, in order
        self.decide_calls = self.cancelled = 0

    async def _answer(self, texts: list[str]) -> list[TextScores]:
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.on_answer()
        if self.failure:
            raise self.failure
        return [TextScores(categories={"toxic": self.toxic.get(t, 0.1)}, model_version="text-1") for t in texts]

    async def score_text(self, request) -> TextScores:
        self.calls.append(("score_text", [request.text]))
        self.requests.append(request)
        return (await self._answer([request.text]))[0]

    async def score_texts(self, requests) -> list[TextScores]:
        self.calls.append(("score_texts", [r.text for r in requests]))
        self.requests.extend(requests)
        return await self._answer([r.text for r in requests])

    async def score_upload(self, upload) -> ScoredImage:
        self.calls.append(("score_upload", [upload.data.decode()]))
        if self.image_failure:
            raise self.image_failure
        scores = ImageScores(categories={"nsfw": 0.05}, safe=0.95, model_version="nsfw-1")
        return ScoredImage(scores=scores, format="PNG", width=4, height=3)

    async def decide_many(self, items, profile, threshold):
        self.decide_calls += 1
        if self.policy_fails:
            raise ConnectionError("policy replica gone")
        return [decide(scores, profile, kind, threshold) for scores, kind in items]


@pytest.fixture
def backends() -> Backends:
    return Backends()


@pytest.fixture
def flow(redis_client, backends):
    return ModerationFlow(QuotaStore(redis_client), ReviewQueue(redis_client), backends, inference_timeout_s=0.5)


async def test_a_review_decision_queues_an_item_with_the_scores_and_model_version(flow, backends):
    backends.toxic["hmm"] = 0.6
    [outcome] = await flow.moderate_many(caller(), [text("hmm", reference="c-1")])
    assert outcome.decision.decision == "review"
    item = await flow.reviews.get(outcome.review_id, account="acme")
    assert (item.reason, item.kind, item.reference, item.scores, item.model_version) == (
        "model_flagged", "text", "c-1", {"toxic": 0.6}, "text-1"
    )


@pytest.mark.parametrize("toxic", [0.1, 0.9])
async def test_allow_and_block_queue_nothing(flow, backends, toxic):
    backends.toxic["x"] = toxic
    [outcome] = await flow.moderate_many(caller(), [text("x")])
    assert outcome.review_id is None
    assert await flow.reviews.list(account="acme") == []


async def test_every_moderation_takes_one_unit(flow):
    for _ in range(3):
        await flow.moderate_many(caller(), [text()])
    assert await flow.quota.quota_used("acme") == 3


async def test_an_exhausted_quota_refuses_before_the_model_runs(flow, backends):
    await flow.moderate_many(caller(quota=1), [text()])
    with pytest.raises(QuotaExceeded):
        await flow.moderate_many(caller(quota=1), [text()])
    assert len(backends.calls) == 1


async def test_an_upload_the_decoder_refuses_gives_the_unit_back_and_keeps_its_error(flow, backends):
    backends.image_failure = InvalidImage("not a JPEG, PNG, WebP, GIF, BMP or TIFF image")
    with pytest.raises(InvalidImage):
        await flow.moderate_many(caller(), [image()])
    assert backends.decide_calls == 0 and await flow.quota.quota_used("acme") == 0


async def test_a_client_that_hangs_up_mid_request_keeps_its_unit_spent(flow, backends):
    backends.delay_s = 5
    task = asyncio.create_task(flow.moderate_many(caller(), [text()]))
    while not backends.calls:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await flow.quota.quota_used("acme") == 1


async def test_the_unit_goes_back_to_the_month_it_was_taken_from(flow, backends, monkeypatch):
    charged_at = 1_798_761_599.0  # 2026-12-31 23:59:59 UTC
    monkeypatch.setattr(flow_module.time, "time", lambda: charged_at)

    backends.on_answer = lambda: monkeypatch.setattr(flow_module.time, "time", lambda: charged_at + 2)  # 2027-01-01
    backends.failure = ConnectionError("replica gone")
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), [text()])
    assert await flow.quota.quota_used("acme", now=charged_at) == 0
    assert await flow.quota.quota_used("acme", now=charged_at + 2) == 0


async def test_a_failing_model_is_model_unavailable_and_gives_the_unit_back(flow, backends):
    backends.failure = ConnectionError("replica gone")
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), [text()])
    assert await flow.quota.quota_used("acme") == 0


async def test_a_model_past_the_timeout_is_model_unavailable_and_gives_the_unit_back(flow, backends):
    backends.delay_s = 5
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), [text()])
    assert await flow.quota.quota_used("acme") == 0


async def test_a_failing_policy_decides_nothing_and_gives_the_unit_back(flow, backends):
    backends.policy_fails = True
    backends.toxic["hmm"] = 0.6
    with pytest.raises(ModelUnavailable, match="policy"):
        await flow.moderate_many(caller(), [text("hmm")])
    assert await flow.quota.quota_used("acme") == 0
    assert await flow.reviews.list(account="acme") == []


async def test_a_threshold_override_makes_the_decision_binary(flow, backends):
    backends.toxic["hmm"] = 0.6
    [outcome] = await flow.moderate_many(caller(), [text("hmm")], threshold=0.7)
    assert (outcome.decision.decision, outcome.decision.threshold, outcome.review_id) == ("allow", 0.7, None)


async def test_the_model_is_asked_with_the_callers_account_and_the_thresholds_that_decide_the_text(flow, backends):
    """The cascade routes a text by the action it can change (models/decision_route.py): its request carries each
    enabled text category's review and block, or the request's ?threshold as both, and whose it is."""
    await flow.moderate_many(caller(), [text("a")])
    await flow.moderate_many(caller(), [text("b")], threshold=0.7)
    first, second = backends.requests
    assert first.account == second.account == "acme"
    assert first.limits == (CategoryLimits("toxic", 0.5, 0.8),)  # nsfw decides images, not texts
    assert second.limits == (CategoryLimits("toxic", 0.7, 0.7),)


async def test_a_text_told_no_decision_carries_no_thresholds_and_every_span_decides_nothing(flow, backends):
    """Perspective's texts (scores only, its clients cut them) route by the cascade's band; a span is never sent on
    (models/decision_route.py: DECIDES_NOTHING)."""
    scores_only = text_item(PROFILE, "Fine. Awful!", spans=[(0, 5)], decided=False)
    decided = text_item(PROFILE, "Fine. Awful!", spans=[(6, 12)])
    await flow.moderate_many(caller(), [scores_only, decided])
    whole, span_of_scores_only, told, span_of_decided = backends.requests  # each text, then its spans
    assert whole.limits is None and told.limits == (CategoryLimits("toxic", 0.5, 0.8),)
    assert span_of_scores_only.limits == span_of_decided.limits == DECIDES_NOTHING == ()
    assert {r.account for r in backends.requests} == {"acme"}


async def test_a_batch_takes_one_unit_per_item_and_queues_each_review_on_its_own(flow, backends):
    backends.toxic.update({"b": 0.6, "c": 0.6})
    outcomes = await flow.moderate_many(caller(), [text("a"), text("b", reference="r-1"), text("c", reference="r-2")])
    assert [o.decision.decision for o in outcomes] == ["allow", "review", "review"]
    assert [(await flow.reviews.get(o.review_id)).reference for o in outcomes[1:]] == ["r-1", "r-2"]
    assert await flow.quota.quota_used("acme") == 3


async def test_a_batch_larger_than_the_quota_left_takes_nothing(flow, backends):
    await flow.moderate_many(caller(quota=4), [text()] * 2)
    with pytest.raises(QuotaExceeded):
        await flow.moderate_many(caller(quota=4), [text()] * 3)
    assert await flow.quota.quota_used("acme") == 2 and len(backends.calls) == 1


async def test_a_failing_text_call_fails_the_batch_gives_every_unit_back_and_queues_nothing(flow, backends):
    backends.toxic.update({"a": 0.6, "b": 0.6})
    backends.failure = ConnectionError("replica gone")
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), [text("a"), text("b")])
    assert await flow.quota.quota_used("acme") == 0
    assert await flow.reviews.list(account="acme") == []


async def test_a_refused_image_cancels_the_texts_call_and_gives_every_unit_back(flow, backends):
    backends.delay_s = 5
    backends.image_failure = InvalidImage("not an image")
    with pytest.raises(InvalidImage):
        await flow.moderate_many(caller(), [text("look"), image()])
    await asyncio.sleep(0)  # the cancelled call runs to its end
    assert backends.cancelled == 1 and await flow.quota.quota_used("acme") == 0


async def test_the_texts_of_a_request_go_to_the_model_in_one_call_and_the_policy_in_one_call(flow, backends):
    backends.toxic.update({"b": 0.6, "c": 0.9})
    outcomes = await flow.moderate_many(caller(), [text("a"), text("b"), text("c")])
    assert [o.decision.decision for o in outcomes] == ["allow", "review", "block"]
    assert backends.calls == [("score_texts", ["a", "b", "c"])] and backends.decide_calls == 1


async def test_a_requests_only_text_goes_alone_so_the_model_deployment_batches_it_with_others(flow, backends):
    await flow.moderate_many(caller(), [text("alone")])
    assert backends.calls == [("score_text", ["alone"])]


async def test_a_long_text_goes_alone_outside_the_shared_batch_so_short_texts_never_wait_for_its_windows(flow, backends):
    at_limit, over = "w" * SHORT_TEXT_WORK_CHARS, "w" * (SHORT_TEXT_WORK_CHARS + 1)
    await flow.moderate_many(caller(), [text(at_limit)])
    await flow.moderate_many(caller(), [text(over)])
    assert backends.calls == [("score_text", [at_limit]), ("score_texts", [over])]


async def test_spans_ride_the_texts_call_and_cost_one_more_unit_and_no_decision(flow, backends):
    backends.toxic.update({"Fine. Awful!": 0.6, "Fine.": 0.1, "Awful!": 0.95})
    item = text_item(PROFILE, "Fine. Awful!", spans=[(0, 5), (6, 12)])
    [outcome] = await flow.moderate_many(caller(), [item])
    assert backends.calls == [("score_texts", ["Fine. Awful!", "Fine.", "Awful!"])]
    assert outcome.scored.categories == {"toxic": 0.6} and outcome.decision.decision == "review"
    assert outcome.span_scores == ({"toxic": 0.1}, {"toxic": 0.95})
    assert await flow.quota.quota_used("acme") == 2 and backends.decide_calls == 1  # the text, and its spans


async def test_a_text_with_spans_costs_two_units_and_without_quota_for_both_is_refused_before_any_model_call(
    flow, backends
):
    item = text_item(PROFILE, "Fine. Awful!", spans=[(0, 5), (6, 12)])
    with pytest.raises(QuotaExceeded):
        await flow.moderate_many(caller(quota=1), [item])
    assert backends.calls == [] and await flow.quota.quota_used("acme") == 0


async def test_an_image_and_texts_are_scored_side_by_side_and_answered_in_request_order(flow, backends):
    outcomes = await flow.moderate_many(caller(), [text("a"), image(), text("b")])
    assert sorted(backends.calls) == [("score_texts", ["a", "b"]), ("score_upload", ["upload"])]
    assert [type(o.scored).__name__ for o in outcomes] == ["TextScores", "ScoredImage", "TextScores"]
    assert outcomes[1].scored.width == 4 and await flow.quota.quota_used("acme") == 3


async def test_a_failed_model_call_is_logged_by_its_errors_type_never_with_the_text_its_message_may_quote(
    flow, backends, caplog
):
    secret = "zqxjv-the-users-own-words"
    backends.failure = RuntimeError(f"could not tokenize {secret!r}")  # as a model library's error may read
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(), [text(secret)])
    assert "RuntimeError" in caplog.text and secret not in caplog.text


async def test_past_the_plans_max_in_flight_a_request_is_refused_before_any_unit_or_model_call(flow, backends):
    backends.delay_s = 0.3
    first = asyncio.ensure_future(flow.moderate_many(caller(max_in_flight=1), [text("first")]))
    await asyncio.sleep(0.1)  # the first holds the account's only slot, scoring
    with pytest.raises(TooManyInFlight):
        await flow.moderate_many(caller(max_in_flight=1), [text("second")])
    await first
    assert backends.calls == [("score_text", ["first"])] and await flow.quota.quota_used("acme") == 1
    await flow.quota.settled()
    assert await flow.quota.in_flight("acme") == 0  # given back when the first ended


async def test_a_failed_request_gives_its_slot_back_too(flow, backends):
    backends.failure = RuntimeError("model down")
    with pytest.raises(ModelUnavailable):
        await flow.moderate_many(caller(max_in_flight=1), [text()])
    await flow.quota.settled()
    assert await flow.quota.in_flight("acme") == 0
    backends.failure = None
    await flow.moderate_many(caller(max_in_flight=1), [text()])


class RecordedGates(ModelGates):
    """The real gates, with each call's (kind, account) recorded."""

    def __init__(self, rules: GateRules):
        super().__init__({kind: rules for kind in ("text", "long_text", "image", "image_text")})
        self.entered: list[tuple[str, str]] = []

    def passed(self, kind: str, account: str):
        self.entered.append((kind, account))
        return super().passed(kind, account)


def gated_flow(redis_client, backends, rules: GateRules) -> ModerationFlow:
    return ModerationFlow(QuotaStore(redis_client), ReviewQueue(redis_client), backends, inference_timeout_s=0.5,
                          gates=RecordedGates(rules))  # fmt: skip


async def test_each_model_call_waits_at_the_gate_of_its_kind_of_work_under_its_account(redis_client, backends):
    flow = gated_flow(redis_client, backends, GateRules(max_active=4))
    await flow.moderate_many(caller(), [text("a"), image(), image()])
    await flow.moderate_many(caller(), [text("w" * (SHORT_TEXT_WORK_CHARS + 1))])
    assert sorted(flow.gates.entered) == [("image", "acme"), ("image", "acme"), ("long_text", "acme"),
                                             ("text", "acme")]  # fmt: skip


async def test_a_call_the_gate_refuses_is_overloaded_before_the_model_and_gives_the_units_back(redis_client, backends):
    flow = gated_flow(redis_client, backends, GateRules(max_active=1, max_waiting=0))
    backends.delay_s = 0.3
    first = asyncio.ensure_future(flow.moderate_many(caller(), [text("first")]))
    await asyncio.sleep(0.1)  # the first holds the text gate's only place
    with pytest.raises(Overloaded):
        await flow.moderate_many(caller(), [text("second")])
    await first
    assert backends.calls == [("score_text", ["first"])] and await flow.quota.quota_used("acme") == 1


async def test_a_wait_at_the_gate_counts_against_the_models_time_limit(redis_client, backends):
    flow = gated_flow(redis_client, backends, GateRules(max_active=1))
    backends.delay_s = 0.4  # two calls in a row: the second's wait and call together pass the 0.5 s limit
    results = await asyncio.gather(flow.moderate_many(caller(), [text("a")]), flow.moderate_many(caller(), [text("b")]),
                                   return_exceptions=True)  # fmt: skip
    # Whichever takes the gate first is answered; the other's wait and call pass the limit.
    assert sorted(type(result).__name__ for result in results) == ["ModelUnavailable", "list"]
