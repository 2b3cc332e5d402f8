"""The text cascade's pure parts (models/text_cascade.py, models/text_cascade_completion.py): the band, the answers'
versions, and how a second stage that is busy, slow, failing, mid-swap or absent still leaves every text answered.
The real model's checks (the committed band, share 100% equal to the opt-in blend) need `make gemma` and skip
elsewhere, saying why."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest

from models import embeddinggemma
from models.text_cascade_completion import (
    BUSY,
    COOLING,
    DEADLINE,
    DEADLINE_MARGIN_S,
    MISMATCH,
    OUT_OF_BAND,
    SECOND_STAGE,
    TIMEOUT,
    UNAVAILABLE,
    ABSENT,
    Busy,
    CascadeCompletion,
)
from models.text_cascade import (
    BAND_FILE,
    SECOND_STAGE_REFUSED,
    SHARES_FILE,
    band_routed_version,
    CascadeBand,
    CascadeRouting,
    SecondStageAnswer,
    SecondStageItem,
    distance_from_even_odds,
)
from models.text_scoring import TextScores
from models.text_toxicity import DEFAULT_WEIGHTS

GEMMA_MISSING = "EmbeddingGemma is not set up here (run `make gemma`; MODERATION_GEMMA_DIR)"
TAG = "gbabc12345"
VERSION = f"usem3-x-c30{TAG}"
ITEM = SecondStageItem(("you are awful",), (0.55,), "en")


def band_of(scores) -> CascadeBand:
    return CascadeBand.fitted(np.array(scores), "usem3-x")


def test_the_band_of_a_share_holds_that_share_of_the_dev_scores_nearest_even_odds():
    rng = np.random.default_rng(3)
    dev = 1 / (1 + np.exp(-rng.normal(0, 3, 20_000)))
    band = band_of(dev)
    for share in (0.1, 0.3, 0.5, 0.9):
        inside = np.mean([band.contains(score, share) for score in dev[:4000]])
        assert inside == pytest.approx(share, abs=0.03)
    # Nested: a text in a narrower band is in every wider one, and the band is centred on even odds.
    assert band.width(0.1) < band.width(0.3) < band.width(0.5)
    assert band.contains(0.5, 0.01) and not band.contains(0.999, 0.5)
    assert band.contains(0.9, 0.5) == band.contains(0.1, 0.5)


def test_share_zero_sends_nothing_on_and_share_one_everything():
    band = band_of([0.2, 0.5, 0.8])
    assert not band.contains(0.5, 0.0)
    assert band.contains(1e-9, 1.0) and band.contains(1.0, 1.0)
    with pytest.raises(ValueError):
        band.width(1.5)


def test_a_band_file_for_another_model_or_out_of_order_is_refused(tmp_path):
    path = tmp_path / BAND_FILE
    path.write_text(json.dumps(band_of([0.1, 0.4, 0.7]).document(3, "test")))
    assert CascadeBand.read(path, "usem3-x").width(0.5) > 0
    with pytest.raises(ValueError, match="is for usem3-x"):
        CascadeBand.read(path, "usem3-y")
    document = json.loads(path.read_text())
    document["distance_quantiles"] = document["distance_quantiles"][::-1]
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="non-decreasing"):
        CascadeBand.read(path, "usem3-x")


def test_a_language_with_enough_dev_texts_gets_a_band_of_its_own(tmp_path):
    rng = np.random.default_rng(4)
    scores = np.r_[1 / (1 + np.exp(-rng.normal(0, 1, 500))), 1 / (1 + np.exp(-rng.normal(0, 6, 500))), [0.5] * 5]
    languages = np.array(["ko"] * 500 + ["en"] * 500 + ["da"] * 5, dtype=object)
    band = CascadeBand.fitted(scores, "usem3-x", languages, min_rows=100)
    assert set(band.languages) == {"ko", "en"}  # Danish: too few texts for a band of its own
    assert band.width(0.5, "ko") < band.width(0.5) < band.width(0.5, "en")
    assert band.width(0.5, "da") == band.width(0.5, None) == band.width(0.5)  # the band over every language
    path = tmp_path / BAND_FILE
    path.write_text(json.dumps(band.document(1005, "test", {"ko": 500, "en": 500})))
    again = CascadeBand.read(path, "usem3-x")
    assert again.width(0.3, "ko") == pytest.approx(band.width(0.3, "ko"), abs=1e-5)


def test_shares_per_language_route_each_text_on_its_own_languages_band(tmp_path):
    routing = CascadeRouting(0.7, {"en": 0.0, "pl": 0.6})
    assert routing.share_for("en") == 0.0 and routing.share_for("pl") == 0.6
    assert routing.share_for("sw") == routing.share_for(None) == 0.7  # not chosen, or not detected: the default
    assert routing.band_of("pl") == (0.6, "pl") and routing.band_of(None) == (0.7, None)
    uniform = CascadeRouting.uniform(0.3)
    assert uniform.tag == "c30" and uniform.band_of("pl") == (0.3, None)  # one share: the band over every language
    assert routing.tag.startswith("cl") and routing.tag != CascadeRouting(0.7, {"en": 0.1, "pl": 0.6}).tag
    assert routing.tag == CascadeRouting(0.7, {"pl": 0.6, "en": 0.0}).tag  # the table, not its order
    with pytest.raises(ValueError):
        CascadeRouting(0.7, {"en": 1.5})
    path = tmp_path / SHARES_FILE
    path.write_text(json.dumps({"model_version": "usem3-x", "default": 0.7, "languages": {"en": 0.0, "pl": 0.6}}))
    assert CascadeRouting.read(path, "usem3-x") == routing
    with pytest.raises(ValueError, match="not usem3-y"):
        CascadeRouting.read(path, "usem3-y")


def test_the_per_language_cascade_sends_a_language_at_share_0_nowhere_and_keeps_its_version():
    """The committed routing (`cl<hash>`) loads to its registry version; with English at share 0 an English text
    in any band stays usem3's, while a German one at share 1 goes on."""
    from models.registry import load_model, read_registry
    from models.text_cascade import CascadeFirstStage
    from models.text_gemma_blend import BLEND_FILE, GemmaBlend
    from models.text_toxicity import TextToxicityModel

    entries = [e for e in read_registry() if e.loader == "use_cascade" and e.options.get("per_language")]
    assert len(entries) == 2  # by the band alone, and by decision with the band for texts told no decision
    for entry in entries:
        served = load_model(entry)
        assert served.model_version == entry.version and served.routing.languages
        assert (served.decision_route is not None) == bool(entry.options.get("by_decision"))
    # The two route a text told no decision alike: one band version, the one Perspective's scale names.
    assert len({band_routed_version(entry.version) for entry in entries}) == 1
    model = TextToxicityModel.load()
    band = CascadeBand.read(DEFAULT_WEIGHTS.with_name(BAND_FILE), model.model_version)
    stage = CascadeFirstStage(model, band, CascadeRouting(1.0, {"en": 0.0}),
                              GemmaBlend.read(DEFAULT_WEIGHTS.with_name(BLEND_FILE)))
    (_, english), (_, german) = stage.predict_staged(["You are a complete and utter idiot, aren't you?",
                                                      "Du bist wirklich ein kompletter Idiot, oder?"])
    assert english is None and german is not None and german.language == "de"


def test_the_default_sends_on_every_text_told_no_decision_and_no_span():
    """The served default (`c100dr<hash>`): a text told no decision (Perspective's) goes on whatever its score, since
    its client cuts where we cannot see; a span decides nothing and stays usem3's; a decided text goes by decision."""
    from models.decision_route import DECIDES_NOTHING, CategoryLimits
    from models.registry import find_entry, load_model
    from training.served_cascade import served_text_version

    entry = find_entry("text.toxic", served_text_version())
    stage = load_model(entry)
    assert entry.options == {"share": 1.0, "by_decision": True} and stage.decision_route is not None
    sure, unsure = "Thank you so much for the lovely flowers, they made my day!", "You people are a bit much."
    told = (CategoryLimits("toxic", 0.5, 0.8),)
    answers = stage.predict_with_evidence([sure, sure, unsure, unsure],
                                          [None, DECIDES_NOTHING, DECIDES_NOTHING, told])
    (scores, no_decision, _), (_, span, _), (_, unsure_span, _), _ = answers
    assert scores["toxic"] < 0.05 and no_decision is not None  # far from any cut, and still sent on
    assert span is None and unsure_span is None


def test_distance_from_even_odds_is_symmetric_and_grows_outwards():
    assert distance_from_even_odds(0.5) == pytest.approx(0.0)
    assert distance_from_even_odds(0.2) == pytest.approx(distance_from_even_odds(0.8))
    assert distance_from_even_odds(0.05) > distance_from_even_odds(0.2)


def scores(item: SecondStageItem | None = ITEM, version: str = VERSION) -> TextScores:
    return TextScores({"toxic": 0.55, "insult": 0.1}, version, second_stage=item)


class SecondStageDouble:
    """A second stage as the TextModel sees it: an awaitable call that answers, refuses, hangs or fails."""

    def __init__(self, behaviour: str = "answer", version: str = f"embeddinggemma-int8-{TAG}"):
        self.behaviour, self.version, self.calls = behaviour, version, 0

    async def __call__(self, item: SecondStageItem) -> SecondStageAnswer:
        self.calls += 1
        if self.behaviour == "busy":
            raise Busy()
        if self.behaviour == "hang":
            await asyncio.sleep(30)
        if self.behaviour == "fail":
            raise RuntimeError("replica died")
        return SecondStageAnswer(0.91, self.version)


def complete(completion: CascadeCompletion, *answers: TextScores, tag: str | None = TAG) -> list[TextScores]:
    return asyncio.run(completion.complete(list(answers), tag))


def test_the_second_stage_replaces_toxic_alone_and_the_route_says_it_decided_while_the_version_stays():
    routes = []
    (done,) = complete(CascadeCompletion(SecondStageDouble(), record=routes.append), scores())
    assert done.categories == {"toxic": 0.91, "insult": 0.1}
    assert done.model_version == VERSION and done.cascade_route == SECOND_STAGE and done.second_stage is None
    assert routes == [SECOND_STAGE]


def test_a_text_out_of_the_band_is_usem3s_and_never_asks():
    second, routes = SecondStageDouble(), []
    (done,) = complete(CascadeCompletion(second, record=routes.append), scores(item=None))
    assert (done.categories["toxic"], done.model_version, second.calls) == (0.55, VERSION, 0)
    assert done.cascade_route == OUT_OF_BAND
    assert routes == [OUT_OF_BAND]


@pytest.mark.parametrize("behaviour, route", [("busy", BUSY), ("hang", TIMEOUT), ("fail", UNAVAILABLE)])
def test_a_busy_slow_or_failing_second_stage_leaves_usem3s_score_within_the_timeout(behaviour, route):
    routes = []
    completion = CascadeCompletion(SecondStageDouble(behaviour), timeout_s=0.2, record=routes.append)
    started = asyncio.run(_timed(completion, scores()))
    done, seconds = started
    assert done.categories["toxic"] == 0.55 and done.model_version == VERSION and done.cascade_route == route
    assert seconds < 1.0 and routes == [route]


async def _timed(completion, answer):
    loop = asyncio.get_running_loop()
    start = loop.time()
    (done,) = await completion.complete([answer], TAG)
    return done, loop.time() - start


def test_after_a_timeout_or_failure_the_second_stage_rests_then_is_asked_again():
    now = [100.0]
    second, routes = SecondStageDouble("fail"), []
    completion = CascadeCompletion(second, cooldown_s=5, record=routes.append, clock=lambda: now[0])
    complete(completion, scores())
    complete(completion, scores())  # within the cooldown: not asked
    assert second.calls == 1 and routes == [UNAVAILABLE, COOLING]
    second.behaviour, now[0] = "answer", 106.0
    (done,) = complete(completion, scores())
    assert second.calls == 2 and done.cascade_route == SECOND_STAGE and routes[-1] == SECOND_STAGE


def test_a_timeout_rests_the_second_stage_only_when_it_answered_nothing_for_the_cooldown():
    """A timeout while answers still arrive is a long queue, not a stage down: resting it would skip every text for
    the cooldown. A timeout with no answer for a whole cooldown is a stage down (or hung): it rests."""
    now = [100.0]
    second, routes = SecondStageDouble("answer"), []
    completion = CascadeCompletion(second, timeout_s=0.05, cooldown_s=5, record=routes.append, clock=lambda: now[0])
    complete(completion, scores())
    second.behaviour = "hang"
    complete(completion, scores())  # 0 s after an answer (the clock stands still): behind, not down
    now[0] += 4.5
    complete(completion, scores())
    assert second.calls == 3 and routes == [SECOND_STAGE, TIMEOUT, TIMEOUT]
    now[0] += 1.0  # a whole cooldown without an answer
    complete(completion, scores())
    complete(completion, scores())
    assert second.calls == 4 and routes[-2:] == [TIMEOUT, COOLING]


def test_a_refused_answer_counts_busy_keeps_usem3s_score_and_rests_nothing():
    second, routes = SecondStageDouble(version=SECOND_STAGE_REFUSED), []
    completion = CascadeCompletion(second, record=routes.append)
    done, again = complete(completion, scores(), scores())
    assert (done.categories["toxic"], done.cascade_route) == (0.55, BUSY)
    assert second.calls == 2 and routes == [BUSY, BUSY]


def test_a_request_with_more_texts_sent_on_waits_longer_for_them(monkeypatch):
    """One text waits timeout_s; each further text sent on in the same request adds SECONDS_PER_TEXT_SENT_ON (they
    queue behind each other), texts not sent on add nothing."""
    from models import text_cascade_completion

    monkeypatch.setattr(text_cascade_completion, "SECONDS_PER_TEXT_SENT_ON", 0.2)  # wide margins on a busy machine

    class Slow(SecondStageDouble):
        async def __call__(self, item):
            await asyncio.sleep(0.3)  # past timeout_s, within 0.1 + 3 x 0.2 s
            return await super().__call__(item)

    routes = []
    completion = CascadeCompletion(Slow(), timeout_s=0.1, record=routes.append)
    complete(completion, scores())
    assert routes == [TIMEOUT]
    routes.clear()
    completion = CascadeCompletion(Slow(), timeout_s=0.1, record=routes.append)  # not resting after the timeout
    complete(completion, *[scores() for _ in range(4)], scores(item=None))  # 4 sent on: 0.1 + 3 x 0.2 s
    assert routes.count(SECOND_STAGE) == 4 and routes.count(OUT_OF_BAND) == 1


def test_a_many_text_requests_items_say_so_to_the_queue():
    seen = []

    class Recording(SecondStageDouble):
        async def __call__(self, item):
            seen.append(item.from_batch)
            return await super().__call__(item)

    completion = CascadeCompletion(Recording())
    asyncio.run(completion.complete([scores()], TAG))
    asyncio.run(completion.complete([scores(), scores()], TAG, from_batch=True))
    assert seen == [False, True, True]


def test_a_callers_deadline_bounds_the_wait_for_the_second_stage_and_does_not_rest_it():
    second, routes = SecondStageDouble("hang"), []
    completion = CascadeCompletion(second, timeout_s=5, record=routes.append)

    async def within_the_deadline():
        loop, now = asyncio.get_running_loop(), time.time()
        start = loop.time()
        (done,) = await completion.complete([scores()], TAG, [now + DEADLINE_MARGIN_S + 0.2])
        return done, loop.time() - start

    done, seconds = asyncio.run(within_the_deadline())
    assert done.cascade_route == DEADLINE and done.categories["toxic"] == 0.55
    assert seconds < 1.0 and routes == [DEADLINE]  # not the 5 s timeout
    answering = CascadeCompletion(SecondStageDouble("answer"), record=routes.append)
    (done,) = asyncio.run(answering.complete([scores()], TAG, [time.time() + 5]))
    assert done.cascade_route == SECOND_STAGE and routes[-1] == SECOND_STAGE
    # A deadline is the caller's, not the second stage's fault: the next text without one is still asked.
    second.behaviour = "answer"
    (done,) = complete(completion, scores())
    assert done.cascade_route == SECOND_STAGE and routes[-1] == SECOND_STAGE


def test_a_text_whose_deadline_has_passed_never_asks_the_second_stage():
    second, routes = SecondStageDouble("answer"), []
    completion = CascadeCompletion(second, record=routes.append)
    done, kept = asyncio.run(completion.complete([scores(), scores()], TAG, [time.time() - 1, None]))
    assert second.calls == 1 and routes == [DEADLINE, SECOND_STAGE]
    assert (done.cascade_route, kept.cascade_route) == (DEADLINE, SECOND_STAGE)


def test_a_busy_second_stage_is_asked_again_at_once():
    second, routes = SecondStageDouble("busy"), []
    completion = CascadeCompletion(second, record=routes.append)
    complete(completion, scores(), scores())
    assert second.calls == 2 and routes == [BUSY, BUSY]


def test_an_answer_from_another_blend_is_not_used():
    routes = []
    completion = CascadeCompletion(SecondStageDouble(version="embeddinggemma-int8-gbother"), record=routes.append)
    (done,) = complete(completion, scores())
    assert done.categories["toxic"] == 0.55 and done.cascade_route == MISMATCH and routes == [MISMATCH]


def test_without_a_second_stage_in_band_texts_say_it_was_skipped():
    routes = []
    (done,) = complete(CascadeCompletion(None, record=routes.append), scores())
    assert done.cascade_route == ABSENT and routes == [ABSENT]


def test_answers_of_a_model_that_is_not_the_cascade_pass_unchanged():
    second, routes = SecondStageDouble(), []
    plain = TextScores({"toxic": 0.3}, "usem3-x")
    assert complete(CascadeCompletion(second, record=routes.append), plain, tag=None) == [plain]
    assert complete(CascadeCompletion(second, record=routes.append), plain) == [plain]  # another model's answer
    assert second.calls == 0 and routes == []


def test_the_texts_of_one_request_are_asked_together():
    class Concurrent(SecondStageDouble):
        def __init__(self):
            super().__init__()
            self.active = self.most = 0

        async def __call__(self, item):
            self.active += 1
            self.most = max(self.most, self.active)
            await asyncio.sleep(0.05)
            self.active -= 1
            return await super().__call__(item)

    second = Concurrent()
    done = complete(CascadeCompletion(second), scores(), scores(), scores(item=None), scores())
    assert second.most == 3
    assert [d.cascade_route for d in done] == [SECOND_STAGE, SECOND_STAGE, OUT_OF_BAND, SECOND_STAGE]


def test_the_committed_band_belongs_to_the_served_usem3_model():
    from models.text_toxicity import TextToxicityModel

    version = json.loads(DEFAULT_WEIGHTS.with_name("calibration.json").read_text())["model_version"]
    band = CascadeBand.read(DEFAULT_WEIGHTS.with_name(BAND_FILE), version)
    assert 0 < band.width(0.1) < band.width(0.3) < band.width(0.5)
    assert TextToxicityModel.load().model_version == version


@pytest.mark.skipif(not embeddinggemma.available(), reason=GEMMA_MISSING)
def test_the_cascade_at_share_100_is_the_opt_in_blend_and_its_versions_match_the_registry():
    """Every text through both stages scores exactly as the opt-in blend scores it (same windows, cap, maps)."""
    from models.registry import find_entry, load_model, read_registry
    from models.text_gemma_blend import GemmaBlendTextModel
    from models.text_scoring import TextRequest, TextScorer

    (everything,) = [e for e in read_registry() if e.loader == "use_cascade" and e.options.get("share") == 1.0
                     and not e.options.get("by_decision")]
    first = load_model(everything)
    (stage_entry,) = [e for e in read_registry() if e.loader == "gemma_second_stage"]
    second = load_model(stage_entry)
    assert first.model_version == everything.version and second.model_version == stage_entry.version
    assert find_entry("text.toxic", everything.version).version.endswith(first.second_stage_tag)
    texts = ["You are a worthless idiot.", "Danke für die schnelle Hilfe!", "quelle bande de nuls " * 60, ""]
    staged = TextScorer(first, first.model_version).score([TextRequest(t, ("toxic",)) for t in texts])
    items = [s.second_stage for s in staged]
    assert items[-1] is None and all(items[:-1])  # an empty text has no window to send
    assert len(items[2].windows) <= 8  # a long text sends only the windows usem3 scored most toxic
    cascaded = [a.toxic for a in second.score(items[:-1])]
    blend = GemmaBlendTextModel.load().predict(texts[:-1])
    assert np.allclose(cascaded, [b["toxic"] for b in blend], atol=1e-6)


@pytest.mark.skipif(not embeddinggemma.available(), reason=GEMMA_MISSING)
def test_a_texts_second_stage_score_does_not_depend_on_the_texts_batched_with_it():
    """The int8 export quantises activations per session run: batched, a text scored differently from alone (by up
    to 0.06 here), so another caller's texts would move this caller's score. Each window now runs alone."""
    from models.registry import load_model, read_registry

    (stage_entry,) = [e for e in read_registry() if e.loader == "gemma_second_stage"]
    second = load_model(stage_entry)
    mine = SecondStageItem(("such a loser move",), (0.5,), "en")
    others = [SecondStageItem(("Honestly this thread is a mess and the moderators asked twice already " * 3,), (0.4,),
                              "en"), SecondStageItem(("go to hell",), (0.7,), "en")]
    alone = second.score([mine])[0].toxic
    assert second.score([mine, *others])[0].toxic == pytest.approx(alone, abs=1e-9)
    assert second.score([*others, mine])[2].toxic == pytest.approx(alone, abs=1e-9)
