"""POST /v1/moderate-text through the app: fields, scope, length and body errors."""

from __future__ import annotations

import pytest
from support.api import assert_error


def test_result_has_every_field_of_the_spec(api, key, backends):
    backends.toxic = 0.3
    response = api.moderate_text(key, "you are lovely")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "scores", "categories", "blocked_by", "decision", "recommended_action",
        "mode", "threshold", "profile", "model_version",
    }
    assert body["scores"] == {"unsafe": pytest.approx(0.3), "safe": pytest.approx(0.7)}
    assert body["categories"] == {"toxic": pytest.approx(0.3)}
    assert body["model_version"] == "stub-text-1"
    assert backends.text_calls == ["you are lovely"]


def test_review_decision_queues_the_text_with_its_reference(api, key, backends):
    backends.toxic = 0.6
    body = api.moderate_text(key, "hmm", reference="c-9").json()
    assert body["decision"] == "review"
    item = api.client.get(f"/v1/review/{body['review_id']}", headers=key).json()
    assert (item["kind"], item["reference"], item["reason"]) == ("text", "c-9", "model_flagged")


def test_block_lists_toxic_in_blocked_by(api, key, backends):
    backends.toxic = 0.95
    body = api.moderate_text(key).json()
    assert (body["decision"], body["blocked_by"]) == ("block", ["toxic"])


def test_plan_without_text_is_capability_required(api):
    assert_error(api.moderate_text(api.new_key(plan="images-only")), 403, "capability_required")


def test_text_over_the_plan_limit_is_413_text_too_long(api):
    api.put_plan("short", scope="both", monthly_quota=100, rate_per_second=50, burst=50, text_max_chars=10)
    headers = api.new_key(plan="short")
    assert api.moderate_text(headers, "x" * 10).status_code == 200
    assert_error(api.moderate_text(headers, "x" * 11), 413, "text_too_long")


def test_huge_body_is_refused_before_it_is_read(api, key):
    response = api.client.post(
        "/v1/moderate-text", headers={**key, "Content-Type": "application/json"}, content=b"x" * 2_000_000
    )
    assert_error(response, 413, "text_too_long")


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1, 2]", b'{"reference": "r"}', b'{"text": 42}', b'{"text": null}', b'{"text": "a", "reference": 5}'],
)
def test_malformed_body_is_invalid_request(api, key, body):
    response = api.client.post("/v1/moderate-text", headers={**key, "Content-Type": "application/json"}, content=body)
    assert_error(response, 400, "invalid_request")


def test_model_failure_is_503_with_retry_after(api, key, backends):
    backends.failing = True
    response = api.moderate_text(key)
    assert_error(response, 503, "inference_unavailable")
    assert int(response.headers["Retry-After"]) >= 1


TEXT_PROFILE = {
    "nsfw": {"review": 0.4, "block": 0.8},
    "toxic": {"review": 0.5, "block": 0.8},
    "insult": {"review": 0.3, "block": 0.7},
    "identity_attack": {"review": 0.3, "block": 0.7},
    "threat": {"enabled": False, "review": 0.3, "block": 0.7},
}


@pytest.fixture
def text_key(api):
    api.put_profile("text-cats", mode="enforce", report_threshold=3, categories=TEXT_PROFILE)
    return api.new_key(profile="text-cats")


def test_the_result_scores_exactly_the_text_categories_the_profile_enables(api, text_key, backends):
    backends.text_scores = {"insult": 0.2, "identity_attack": 0.1, "threat": 0.9, "profanity": 0.9}
    body = api.moderate_text(text_key).json()
    assert set(body["categories"]) == {"toxic", "insult", "identity_attack"}
    assert backends.text_requests[-1].categories == ("toxic", "insult", "identity_attack")
    assert body["decision"] == "allow"  # threat and profanity are off in this profile, however high


def test_any_enabled_text_category_can_block_and_is_named(api, text_key, backends):
    backends.toxic, backends.text_scores = 0.1, {"insult": 0.75, "identity_attack": 0.72}
    body = api.moderate_text(text_key).json()
    assert (body["decision"], sorted(body["blocked_by"])) == ("block", ["identity_attack", "insult"])
    assert body["scores"]["unsafe"] == pytest.approx(0.1)  # scores.unsafe stays the toxic score
    assert body["threshold"] == 0.7  # the block threshold of the deciding category


def test_a_review_item_keeps_every_enabled_category_score(api, text_key, backends):
    backends.toxic, backends.text_scores = 0.1, {"insult": 0.4}
    body = api.moderate_text(text_key, reference="c-1").json()
    assert body["decision"] == "review"
    item = api.client.get(f"/admin/v1/reviews/{body['review_id']}", headers=api.admin).json()
    assert item["scores"] == {"toxic": 0.1, "insult": 0.4, "identity_attack": 0.0}


def test_a_beta_text_category_is_scored_once_a_profile_enables_it(api, backends):
    categories = {**TEXT_PROFILE, "threat": {"enabled": True, "review": 0.3, "block": 0.7}}
    api.put_profile("with-threat", mode="enforce", report_threshold=3, categories=categories)
    backends.text_scores = {"threat": 0.8}
    body = api.moderate_text(api.new_key(profile="with-threat")).json()
    assert body["categories"]["threat"] == 0.8 and body["blocked_by"] == ["threat"]


def test_the_admin_api_refuses_an_unknown_text_category(api):
    response = api.client.put("/admin/v1/profiles/bad", headers=api.admin, json={
        "mode": "enforce", "report_threshold": 3, "categories": {**TEXT_PROFILE, "hate_speech": {"review": 0.1, "block": 0.2}},
    })
    assert_error(response, 400, "invalid_request")


def test_every_surface_refuses_a_long_text_with_the_same_sentence(api):
    api.put_plan("short", scope="both", monthly_quota=100, rate_per_second=50, burst=50, text_max_chars=10)
    headers = api.new_key(plan="short")
    perspective = {"comment": {"text": "x" * 11}, "requestedAttributes": {"TOXICITY": {}}}
    answers = [
        api.moderate_text(headers, "x" * 11),
        api.client.post("/v1/moderations", headers=headers, json={"input": "x" * 11}),
        api.client.post("/v1alpha1/comments:analyze", headers=headers, json=perspective),
    ]
    assert [(r.status_code, r.json()["error"]["message"]) for r in answers] == [
        (413, "The text is above the plan's limit of 10 characters.")
    ] * 3
