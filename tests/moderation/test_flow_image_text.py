"""The words read on an image through the flow: scored by the text model at `text_toxic`'s thresholds, deciding as an
image category, shown to the moderator as the profile keeps texts, and counted by OpenAI's mapping.

Against a real redis-server (quota and queue), with model backends this test controls.
"""

from __future__ import annotations

import pytest

from models.image_scoring import ImageScores
from models.image_text import ReadText
from models.image_upload import ScoredImage
from models.text_scoring import TextScores
from moderation.compat_mapping import Part, openai_result
from moderation.flow import Caller, ModerationFlow
from moderation.items import image_item
from policy.decisions import decide
from policy.types import IMAGE_CATEGORIES, ApiKey, Plan, Profile
from store.keys.quota import QuotaStore
from store.review.queue import ReviewQueue

pytestmark = pytest.mark.anyio

CATEGORIES = {"nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8},
              "insult": {"review": 0.3, "block": 0.9}, "text_toxic": {"review": 0.6, "block": 0.85}}  # fmt: skip
READING = Profile(name="reading", mode="enforce", categories=CATEGORIES)
OFF = Profile(name="off", mode="enforce", categories={**CATEGORIES, "text_toxic": {**CATEGORIES["text_toxic"],
                                                                                    "enabled": False}})  # fmt: skip


def caller(profile: Profile) -> Caller:
    plan = Plan(name="plan", scope="both", monthly_quota=10, rate_per_second=10, burst=10)
    return Caller(key=ApiKey(id="key_1", account="acme", profile=profile.name, plan="plan", created_at=0), plan=plan,
                  profile=profile)  # fmt: skip


class Backends:
    """An image that reads as `read` (None: its text was not asked for), a text model scoring it `toxic`."""

    def __init__(self, read: str = "", toxic: float = 0.1, partial: bool = False):
        self.read, self.toxic, self.partial = read, toxic, partial
        self.uploads, self.text_requests = [], []

    async def score_upload(self, upload) -> ScoredImage:
        self.uploads.append(upload)
        scores = ImageScores(categories={"nsfw": 0.05}, safe=0.95, model_version="nsfw-1")
        read = ReadText(self.read, self.read.count("\n") + 1 if self.read else 0, self.partial, "ocr-1") \
            if upload.read_text else None
        return ScoredImage(scores=scores, format="PNG", width=4, height=3, read=read)

    async def score_text(self, request) -> TextScores:
        self.text_requests.append(request)
        return TextScores(categories={c: self.toxic for c in request.categories}, model_version="text-1")

    async def score_texts(self, requests):
        return [await self.score_text(request) for request in requests]

    async def decide_many(self, items, profile, threshold):
        return [decide(scores, profile, kind, threshold) for scores, kind in items]


def flow_with(redis_client, backends: Backends) -> ModerationFlow:
    return ModerationFlow(QuotaStore(redis_client), ReviewQueue(redis_client), backends, inference_timeout_s=1.0)


def test_text_toxic_is_an_image_category_of_the_same_name_as_the_models():
    from models.image_text import TEXT_TOXIC

    assert TEXT_TOXIC in IMAGE_CATEGORIES


def test_an_image_item_asks_for_its_text_only_where_the_profile_enables_text_toxic():
    plan = caller(READING).plan
    reading, off = image_item(plan, READING, b"x").content, image_item(plan, OFF, b"x").content
    assert (reading.read_text, off.read_text) == (True, False)
    # No image model scores `text_toxic`: the image models are never asked for it.
    assert "text_toxic" not in reading.categories and reading.categories == ("nsfw",)


async def test_the_words_read_are_scored_as_a_comment_and_decide_as_text_toxic_at_its_own_thresholds(redis_client):
    backends = Backends(read="you are an idiot", toxic=0.9)
    [outcome] = await flow_with(redis_client, backends).moderate_many(caller(READING), [image_item(
        caller(READING).plan, READING, b"x")])  # fmt: skip
    [request] = backends.text_requests
    assert request.text == "you are an idiot" and request.account == "acme"
    assert set(request.categories) == {"toxic", "insult"}
    # Routed as a comment is: by the profile's text thresholds.
    assert [(limit.category, limit.review, limit.block) for limit in request.limits] == [("toxic", 0.5, 0.8),
                                                                                         ("insult", 0.3, 0.9)]
    # toxic 0.9 is past its block (0.8) by half of what is left: on text_toxic's scale, 0.85 + 0.5 x 0.15.
    assert outcome.scored.categories["text_toxic"] == pytest.approx(0.925)
    assert outcome.decision.decision == "block" and outcome.decision.blocked_by == ["text_toxic"]
    assert outcome.scored.model_version == "nsfw-1;text_toxic=ocr-1+text-1"


async def test_a_threshold_override_routes_and_decides_the_words_read_at_it(redis_client):
    backends = Backends(read="hmm", toxic=0.5)
    [outcome] = await flow_with(redis_client, backends).moderate_many(
        caller(READING), [image_item(caller(READING).plan, READING, b"x")], threshold=0.4)
    assert [(limit.review, limit.block) for limit in backends.text_requests[0].limits] == [(0.4, 0.4), (0.4, 0.4)]
    assert outcome.decision.decision == "block"


async def test_nothing_read_makes_no_text_call_and_text_toxic_scores_zero(redis_client):
    backends = Backends(read="")
    [outcome] = await flow_with(redis_client, backends).moderate_many(caller(READING), [image_item(
        caller(READING).plan, READING, b"x")])  # fmt: skip
    assert backends.text_requests == []
    assert outcome.scored.categories == {"nsfw": 0.05, "text_toxic": 0.0}
    assert outcome.decision.decision == "allow"


async def test_a_profile_without_text_toxic_reads_nothing_and_answers_no_such_category(redis_client):
    backends = Backends(read="you are an idiot", toxic=0.9)
    [outcome] = await flow_with(redis_client, backends).moderate_many(caller(OFF), [image_item(
        caller(OFF).plan, OFF, b"x")])  # fmt: skip
    assert backends.text_requests == [] and "text_toxic" not in outcome.scored.categories
    assert outcome.decision.decision == "allow"


@pytest.mark.parametrize("keep", [True, False])
async def test_a_queued_image_shows_the_moderator_the_words_read_as_its_profile_keeps_texts(redis_client, keep):
    profile = READING.model_copy(update={"keep_review_text": keep})
    flow = flow_with(redis_client, Backends(read="go away loser", toxic=0.7))
    [outcome] = await flow.moderate_many(caller(profile), [image_item(caller(profile).plan, profile, b"x")])
    assert outcome.decision.decision == "review"
    item = await flow.reviews.get(outcome.review_id, account="acme")
    assert item.kind == "image" and 0.6 <= item.scores["text_toxic"] < 0.85
    assert item.text == ("go away loser" if keep else None)


def test_openai_counts_the_words_read_on_an_image_toward_harassment_as_an_image_input():
    part = Part(kind="image", scores={"nsfw": 0.01, "text_toxic": 0.9}, decision="block",
                read_scores={"toxic": 0.9, "insult": 0.7})  # fmt: skip
    result = openai_result([part], READING)
    assert result["category_scores"]["harassment"] == 0.9
    assert result["categories"]["harassment"] is True
    assert result["category_applied_input_types"]["harassment"] == ["image"]
    unread = openai_result([Part(kind="image", scores={"nsfw": 0.01}, decision="allow")], READING)
    assert unread["category_scores"]["harassment"] == 0.0 and unread["category_applied_input_types"]["harassment"] == []


async def test_an_image_whose_text_is_read_waits_at_a_gate_of_its_own_then_its_text_at_the_text_gate(redis_client):
    from moderation.model_gates import GateRules, ModelGates

    class Recorded(ModelGates):
        def __init__(self):
            super().__init__({kind: GateRules(max_active=2) for kind in ("text", "long_text", "image", "image_text")})
            self.entered = []

        def passed(self, kind, account):
            self.entered.append(kind)
            return super().passed(kind, account)

    gates = Recorded()
    flow = ModerationFlow(QuotaStore(redis_client), ReviewQueue(redis_client), Backends(read="hi there"),
                          inference_timeout_s=1.0, gates=gates)  # fmt: skip
    await flow.moderate_many(caller(READING), [image_item(caller(READING).plan, READING, b"x")])
    await flow.moderate_many(caller(OFF), [image_item(caller(OFF).plan, OFF, b"x")])
    assert gates.entered == ["image_text", "text", "image"]
