"""Each site's own line through the HTTP API (real Redis, in-test text model that gives evidence): audits, labels
kept by decisions, feedback and suggestscore, the per-account correction (live only when the audited check says so,
never crossing accounts), its reset, the backtest and applying its thresholds."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pytest
from support.api import Api, StubBackends, assert_error, seeded_api

from models.text_scoring import TextEvidence, TextRequest, TextScores
from serve_app.services import Services

SUGGEST = "/v1alpha1/comments:suggestscore"


@dataclass
class SiteBackends(StubBackends):
    """A text's toxic score is `served` unless the text names one ("... toxic=0.7"); its embedding is random per
    text with a planted direction: +3 on the first axis when the text says "harm", -3 when it says "fine". The served
    score ignores that direction, so only a correction can learn it."""

    served: float = 0.3
    encoder: str = "stub-encoder-1"
    calls: int = 0
    seen_texts: list[str] = field(default_factory=list)

    async def score_text(self, request: TextRequest) -> TextScores:
        self.calls += 1
        toxic = float(request.text.split("toxic=")[1].split()[0]) if "toxic=" in request.text else self.served
        seed = int.from_bytes(hashlib.sha256(request.text.encode()).digest()[:8], "little")
        embedding = np.random.default_rng(seed).normal(size=512).astype(np.float32)
        embedding[0] = 3.0 if "harm" in request.text else -3.0 if "fine" in request.text else 0.0
        scores = {c: toxic if c == "toxic" else 0.0 for c in request.categories}
        return TextScores(scores, "stub-text-1", evidence=TextEvidence(embedding.astype(np.float16), "en",
                                                                       self.encoder))


@pytest.fixture
def backends() -> SiteBackends:
    return SiteBackends()


@pytest.fixture
def services(redis_url: str, backends: SiteBackends) -> Services:
    found = Services.connect(redis_url, backends, inference_timeout_s=2)
    found.flow.draw = lambda: 0.0  # every allowed item is drawn: the profile's audit_rate alone decides
    found.test_redis_url = redis_url  # for _labels
    return found


@pytest.fixture
def api(services: Services, backends: SiteBackends):
    with seeded_api(services, backends) as api:
        api.put_profile("site", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                           "toxic": {"review": 0.5, "block": 0.8}}, audit_rate=0.5)
        api.put_plan("default", scope="both", monthly_quota=100_000, rate_per_second=1000, burst=1000)
        yield api


def _reviews(api: Api, account: str) -> list[dict]:
    response = api.client.get("/admin/v1/reviews", params={"account": account, "limit": 1000}, headers=api.admin)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def _decide(api: Api, item_id: int, status: str) -> None:
    response = api.client.post(f"/admin/v1/reviews/{item_id}/decision", json={"status": status}, headers=api.admin)
    assert response.status_code == 200, response.text


def _teach(api: Api, key: dict, account: str, comments: int = 100, invert: bool = False) -> None:
    """Half harm, half fine; every one allowed and audited (rate 0.5); moderators decide each by the planted
    direction (or against it, when `invert`)."""
    for i in range(comments):
        response = api.moderate_text(key, f"comment {i} {'harm' if i % 2 else 'fine'}")
        assert response.status_code == 200 and response.json()["decision"] == "allow"
    for item in _reviews(api, account):
        harmful = ("harm" in (item["text"] or "")) != invert
        _decide(api, item["id"], "rejected" if harmful else "approved")


def test_an_allowed_text_is_audited_at_the_profiles_rate_and_its_answer_is_unchanged(api):
    key = api.new_key(account="site-a", profile="site")
    answer = api.moderate_text(key, "an ordinary comment")
    assert answer.status_code == 200
    assert answer.json()["decision"] == "allow" and "review_id" not in answer.json()
    [item] = _reviews(api, "site-a")
    assert item["reason"] == "audit" and item["status"] == "pending"


def test_a_blocked_text_is_audited_too_and_its_answer_is_unchanged(api):
    key = api.new_key(account="site-a", profile="site")
    answer = api.moderate_text(key, "a vile comment toxic=0.95")
    assert answer.status_code == 200
    assert answer.json()["decision"] == "block" and "review_id" not in answer.json()
    [item] = _reviews(api, "site-a")
    assert item["reason"] == "audit"


def test_no_audit_at_rate_zero(api):
    key = api.new_key(account="site-a", profile="default")
    assert api.moderate_text(key, "an ordinary comment").status_code == 200
    assert _reviews(api, "site-a") == []


def test_audits_stop_at_the_daily_cap_without_changing_answers(redis_url, backends):
    from store.review.queue import ReviewRules

    capped = Services.connect(redis_url, backends, inference_timeout_s=2,
                              review_rules=ReviewRules(audits_per_account_per_day=2))
    capped.flow.draw = lambda: 0.0
    capped.test_redis_url = redis_url
    with seeded_api(capped, backends) as api:
        api.put_profile("site", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                           "toxic": {"review": 0.5, "block": 0.8}}, audit_rate=1.0)
        key = api.new_key(account="site-a", profile="site")
        assert [api.moderate_text(key, f"text {i}").status_code for i in range(4)] == [200] * 4
        assert len(_reviews(api, "site-a")) == 2


def test_a_decided_audit_keeps_a_label_with_its_sampling_rate_and_no_text(api, services):
    key = api.new_key(account="site-a", profile="site")
    api.moderate_text(key, "a harm comment")
    [item] = _reviews(api, "site-a")
    _decide(api, item["id"], "rejected")
    [label] = _labels(services, "site-a")
    assert (label.seen, label.sampling_rate, label.harmful, label.profile) == ("audit", 0.5, True, "site")
    assert label.embedding[0] == pytest.approx(3.0)
    assert "harm comment" not in str(_labels(services, "site-a", raw=True))


def test_a_flagged_text_keeps_a_flagged_label_at_rate_one(api, services):
    key = api.new_key(account="site-a", profile="site")
    assert api.moderate_text(key, "a comment toxic=0.7").json()["decision"] == "review"
    [item] = _reviews(api, "site-a")
    _decide(api, item["id"], "approved")
    [label] = _labels(services, "site-a")
    assert (label.seen, label.sampling_rate, label.harmful) == ("flagged", 1.0, False)
    assert label.served_score == pytest.approx(0.7, abs=1e-4)


def test_feedback_keeps_a_report_label_and_costs_no_unit(api, services):
    key = api.new_key(account="site-a", profile="site")
    response = api.client.post("/v1/feedback", headers=key, json={"text": "removed harm", "label": "harmful",
                                                                   "reference": "c-1"})
    assert response.status_code == 200, response.text
    assert response.json() == {"label": "harmful", "reference": "c-1", "kept": True}
    [label] = _labels(services, "site-a")
    assert (label.seen, label.sampling_rate, label.harmful) == ("report", 1.0, True)
    usage = api.client.get("/admin/v1/accounts/site-a/usage", headers=api.admin).json()
    assert usage["used"] == 0


@pytest.mark.parametrize("body", [{"text": "x", "label": "maybe"}, {"text": "   ", "label": "fine"},
                                  {"label": "fine"}, {"text": "x", "label": "fine", "extra": 1}])
def test_bad_feedback_is_a_400(api, body):
    key = api.new_key(account="site-a", profile="site")
    assert_error(api.client.post("/v1/feedback", headers=key, json=body), 400, "invalid_request")


def test_feedback_needs_a_key(api):
    assert_error(api.client.post("/v1/feedback", json={"text": "x", "label": "fine"}), 401, "unauthorized")


@pytest.mark.parametrize("scores, harmful", [({"TOXICITY": {"summaryScore": {"value": 0.9}}}, True),
                                             ({"TOXICITY": {"summaryScore": {"value": 0.1}}}, False),
                                             ({"DELETED": {"summaryScore": {"value": 1}}}, True),
                                             ({"APPROVED": {"summaryScore": {"value": 1}}}, False)])
def test_a_suggested_score_with_its_comment_keeps_a_label(api, services, scores, harmful):
    key = api.new_key(account="site-a", profile="site")
    response = api.client.post(SUGGEST, params={"key": key["Authorization"].split()[1]},
                               json={"comment": {"text": "some comment"}, "attributeScores": scores})
    assert response.status_code == 200, response.text
    [label] = _labels(services, "site-a")
    assert label.harmful is harmful and label.seen == "report"


def test_a_suggested_score_without_its_comment_keeps_no_label(api, services):
    key = api.new_key(account="site-a", profile="site")
    response = api.client.post(SUGGEST, params={"key": key["Authorization"].split()[1]},
                               json={"attributeScores": {"TOXICITY": {"summaryScore": {"value": 0.9}}}})
    assert response.status_code == 200
    assert _labels(services, "site-a") == []


def test_a_correction_goes_live_on_audited_labels_and_changes_only_its_accounts_answers(api, services):
    key_a, key_b = api.new_key(account="site-a", profile="site"), api.new_key(account="site-b", profile="site")
    _teach(api, key_a, "site-a")
    refit = api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin)
    assert refit.status_code == 200, refit.text
    body = refit.json()
    assert body["active"] is True, body["reason"]
    assert body["corrected_auc"] >= body["served_auc"] + 0.01
    assert set(body["backtest"]["suggested_thresholds"]) == {"review", "block"}
    services.flow.corrections.forget("site-a")  # a replica reads a new fit within FRESH_S; this one now
    answer_a = api.moderate_text(key_a, "new harm comment").json()
    assert answer_a["model_version"] == f"stub-text-1+{body['version']}"
    assert answer_a["categories"]["toxic"] > 0.3
    answer_b = api.moderate_text(key_b, "new harm comment").json()
    assert answer_b["model_version"] == "stub-text-1" and answer_b["categories"]["toxic"] == pytest.approx(0.3)


def test_an_inverting_moderator_cannot_make_a_correction_go_live(api):
    key = api.new_key(account="site-a", profile="site")
    for i in range(100):  # the served score knows the planted direction here: the moderator decides against it
        toxic = 0.45 if i % 2 else 0.1
        api.moderate_text(key, f"comment {i} {'harm' if i % 2 else 'fine'} toxic={toxic}")
    _teach(api, key, "site-a", comments=0, invert=True)
    body = api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin).json()
    assert body["active"] is False and "contradict" in body["reason"]
    assert "+ad" not in api.moderate_text(key, "comment 1 harm toxic=0.45").json()["model_version"]


def test_a_flood_of_feedback_cannot_push_out_the_moderators_labels(redis_url, backends):
    from store.labels.labels import LabelRules
    from store.review.queue import ReviewRules

    rules = ReviewRules(labels=LabelRules(labels_per_account=100, reported_per_account=5))
    services = Services.connect(redis_url, backends, inference_timeout_s=2, review_rules=rules)
    services.flow.draw = lambda: 0.0
    services.test_redis_url = redis_url
    with seeded_api(services, backends) as api:
        api.put_profile("site", mode="enforce", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                           "toxic": {"review": 0.5, "block": 0.8}}, audit_rate=1.0)
        key = api.new_key(account="site-a", profile="site")
        _teach(api, key, "site-a", comments=10)
        for i in range(20):
            api.client.post("/v1/feedback", headers=key, json={"text": f"flood {i}", "label": "fine"})
        assert _labels(services, "site-a", counts=True) == {"decided": 10, "reported": 5}


def test_reset_erases_the_labels_and_the_correction(api, services):
    key = api.new_key(account="site-a", profile="site")
    _teach(api, key, "site-a")
    assert api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin).json()["active"]
    assert api.client.delete("/admin/v1/accounts/site-a/text-adaptation", headers=api.admin).status_code == 204
    status = api.client.get("/admin/v1/accounts/site-a/text-adaptation", headers=api.admin).json()
    assert status["active"] is False and status["labels"] == {"decided": 0, "reported": 0}
    services.flow.corrections.forget("site-a")
    assert "+ad" not in api.moderate_text(key, "new harm comment").json()["model_version"]


def test_applying_the_backtest_moves_the_profiles_thresholds(api):
    key = api.new_key(account="site-a", profile="site")
    _teach(api, key, "site-a")
    backtest = api.client.get("/admin/v1/accounts/site-a/profiles/site/backtest", headers=api.admin)
    assert backtest.status_code == 200, backtest.text
    suggested = backtest.json()["suggested_thresholds"]
    applied = api.client.post("/admin/v1/accounts/site-a/profiles/site/backtest/apply", headers=api.admin)
    assert applied.status_code == 200, applied.text
    profile = api.client.get("/admin/v1/profiles/site", headers=api.admin).json()
    assert profile["categories"]["toxic"] == {"enabled": True, **suggested}


def test_after_a_swap_of_the_text_model_the_old_correction_applies_to_no_answer_and_no_refit(api, services):
    key = api.new_key(account="site-a", profile="site")
    _teach(api, key, "site-a")
    assert api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin).json()["active"]
    api.backends.encoder = "stub-encoder-2"  # a new text model: its embeddings live in another space
    services.flow.corrections.forget("site-a")
    assert "+ad" not in api.moderate_text(key, "new harm comment").json()["model_version"]
    refit = api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin).json()
    assert refit["examples"] == 100 and refit["encoder"] == "stub-encoder-1"  # nothing of the new one labelled yet
    pending = [i for i in _reviews(api, "site-a") if i["status"] == "pending"]  # the new model's audits
    for item in pending:
        _decide(api, item["id"], "approved")
    refit = api.client.post("/admin/v1/accounts/site-a/text-adaptation/refit", headers=api.admin).json()
    assert (refit["examples"], refit["encoder"], refit["active"]) == (len(pending), "stub-encoder-2", False)
    assert len(pending) == 1


def test_nothing_to_apply_is_a_409_and_an_unknown_profile_a_404(api):
    assert_error(api.client.post("/admin/v1/accounts/site-a/profiles/site/backtest/apply", headers=api.admin),
                 409, "no_suggested_thresholds")
    assert_error(api.client.get("/admin/v1/accounts/site-a/profiles/nope/backtest", headers=api.admin),
                 404, "not_found")


def _labels(services: Services, account: str, *, counts: bool = False, raw: bool = False):
    """Read through a connection of its own: the app's belongs to the test client's event loop."""
    import asyncio

    from redis.asyncio import Redis

    from store.labels.labels import LabelStore

    async def read():
        redis = Redis.from_url(services.test_redis_url, decode_responses=True)
        try:
            if raw:
                return await redis.lrange(f"mod:labels:{account}", 0, -1)
            store = LabelStore(redis, services.labels.rules)
            return await (store.counts(account) if counts else store.labels(account))
        finally:
            await redis.aclose()

    return asyncio.run(read())
