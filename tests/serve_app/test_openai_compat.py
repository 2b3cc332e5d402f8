"""POST /v1/moderations (OpenAI-compatible) through the app: shape, mapping, flagged per mode, quota, errors;
and the real `openai` SDK pointed at the in-process app (tests/e2e/test_compat_clients.py: through Ray)."""

from __future__ import annotations

import base64
import json

import openai
import pytest
from support.api import TEST_THRESHOLDS, photo_bytes

from moderation.compat_mapping import OPENAI_SOURCES

CATEGORIES = set(OPENAI_SOURCES)
PNG_URL = "data:image/png;base64," + base64.b64encode(photo_bytes("PNG")).decode()
THREATS = {**TEST_THRESHOLDS, "insult": {"review": 0.3, "block": 0.7},
           "identity_attack": {"review": 0.3, "block": 0.7}, "threat": {"review": 0.3, "block": 0.7}}  # fmt: skip


def moderations(api, headers, input, **fields):
    return api.client.post("/v1/moderations", headers=headers, json={"input": input, **fields})


def usage(api, account="acme") -> int:
    return api.client.get(f"/admin/v1/accounts/{account}/usage", headers=api.admin).json()["used"]


def assert_openai_error(response, status: int, code: str, kind: str = "invalid_request_error") -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"], error["param"]) == (code, kind, None) and set(response.json()) == {"error"}
    return error["message"]


def test_a_string_answers_one_result_in_openais_shape(api, key):
    body = moderations(api, key, "hello", model="omni-moderation-latest").json()
    assert body["id"].startswith("modr-") and body["model"] == "omni-moderation-latest"
    [result] = body["results"]
    assert set(result) == {"flagged", "categories", "category_scores", "category_applied_input_types"}
    assert set(result["categories"]) == set(result["category_scores"]) == CATEGORIES
    assert all(v is False for v in result["categories"].values()) and result["flagged"] is False
    assert result["category_applied_input_types"]["harassment"] == ["text"]
    assert result["category_applied_input_types"]["self-harm"] == []
    assert result["category_scores"]["self-harm"] == 0.0


def test_an_array_of_strings_is_one_result_and_one_unit_per_string(api, key, backends):
    body = moderations(api, key, ["a", "b", "c"]).json()
    assert len(body["results"]) == 3 and body["model"] == "omni-moderation-latest"
    assert usage(api) == 3 and backends.text_calls == ["a", "b", "c"] and backends.text_batches == [3]


def test_text_and_an_image_data_url_are_one_input_one_unit_each(api, key, backends):
    backends.image_scores["nsfw"] = 0.9
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": PNG_URL}}]
    [result] = moderations(api, key, parts).json()["results"]
    assert result["flagged"] and result["categories"]["sexual"]
    assert result["category_scores"]["sexual"] == pytest.approx(0.9)
    assert result["category_applied_input_types"]["sexual"] == ["image"]  # text `sexual` (beta) is off here
    assert result["category_applied_input_types"]["harassment"] == ["text"]
    assert usage(api) == 2 and len(backends.image_calls) == 1


def test_toxic_maps_to_harassment_and_follows_the_profile(api, key, backends):
    backends.toxic = 0.6  # review band of the test profile: enforce -> review -> flagged
    [result] = moderations(api, key, "you idiot").json()["results"]
    assert result["flagged"] and result["categories"]["harassment"] and not result["categories"]["hate"]
    assert result["category_scores"]["harassment"] == pytest.approx(0.6)


def test_identity_attack_with_a_threat_is_hate_threatening_and_violence(api, backends):
    api.put_profile("threats", mode="enforce", categories=THREATS)
    backends.text_scores.update(identity_attack=0.8, threat=0.5)
    [result] = moderations(api, api.new_key(profile="threats"), "...").json()["results"]
    flags = {name for name, on in result["categories"].items() if on}
    assert flags == {"hate", "hate/threatening", "harassment/threatening", "violence"}
    assert result["category_scores"]["hate/threatening"] == pytest.approx(0.5)  # the lower of the two


def test_self_harm_and_violent_speech_reach_openais_self_harm_and_violence_when_the_profile_enables_them(api, backends):
    api.put_profile("beta-text", mode="enforce", categories={
        **TEST_THRESHOLDS, "self_harm": {"review": 0.3, "block": 0.7}, "violent_speech": {"review": 0.3, "block": 0.7}})
    backends.text_scores.update(self_harm=0.6, violent_speech=0.4)
    [result] = moderations(api, api.new_key(profile="beta-text"), "...").json()["results"]
    assert {name for name, on in result["categories"].items() if on} == {"self-harm", "self-harm/intent", "violence"}
    assert result["category_scores"]["self-harm"] == pytest.approx(0.6)
    assert result["category_scores"]["violence"] == pytest.approx(0.4)
    assert result["category_scores"]["self-harm/instructions"] == 0.0  # no model backs it


def test_categories_the_profile_leaves_off_score_0(api, key, backends):
    backends.text_scores.update(threat=0.9, sexual=0.9)  # beta: off in the test profile
    [result] = moderations(api, key, "...").json()["results"]
    assert result["category_scores"]["violence"] == 0.0 and not result["flagged"]
    assert result["category_applied_input_types"]["violence"] == []


def test_monitor_mode_never_flags(api, backends):
    api.put_profile("watch", mode="monitor", categories=TEST_THRESHOLDS)
    backends.toxic = 0.99
    [result] = moderations(api, api.new_key(profile="watch"), "x").json()["results"]
    assert not result["flagged"] and not any(result["categories"].values())
    assert result["category_scores"]["harassment"] == pytest.approx(0.99)


def test_review_mode_flags_the_review_band_and_queues_it(api, backends):
    api.put_profile("humans", mode="review", categories=TEST_THRESHOLDS)
    backends.toxic = 0.6
    headers = api.new_key(profile="humans")
    assert moderations(api, headers, "x").json()["results"][0]["flagged"]
    pending = api.client.get("/admin/v1/reviews", params={"account": "acme"}, headers=api.admin).json()["items"]
    assert [item["kind"] for item in pending] == ["text"]


@pytest.mark.parametrize("url", ["https://example.com/a.png", "file:///etc/passwd", "data:text/plain;base64,aGk="])
def test_an_image_url_that_is_not_a_data_url_is_400_and_never_fetched(api, key, url, backends):
    message = assert_openai_error(moderations(api, key, [{"type": "image_url", "image_url": {"url": url}}]), 400,
                                  "invalid_request")  # fmt: skip
    assert "data:" in message and "never fetches" in message
    assert backends.image_calls == [] and usage(api) == 0


def test_an_unknown_model_is_refused(api, key):
    assert "omni-moderation-latest" in assert_openai_error(moderations(api, key, "x", model="gpt-9"), 400, "model_not_found")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [({"input": 5}, 400, "invalid_request"), ({"input": []}, 400, "invalid_request"),
     ({"input": ["a", {"type": "text", "text": "b"}]}, 400, "invalid_request"),
     ({"input": [{"type": "video"}]}, 400, "invalid_request"), ({"model": "omni-moderation-latest"}, 400, "invalid_request"),
     ({"input": ["x"] * 101}, 400, "invalid_request"),
     ({"input": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}, 400, "invalid_request"),
     ({"input": [{"type": "image_url", "image_url": {"url": PNG_URL}}], "model": "text-moderation-latest"}, 400,
      "invalid_request")],
)  # fmt: skip
def test_malformed_requests_answer_openais_error_shape(api, key, body, status, code):
    assert_openai_error(api.client.post("/v1/moderations", headers=key, json=body), status, code)
    assert usage(api) == 0


def test_auth_quota_and_size_errors_answer_openais_error_shape(api):
    assert_openai_error(api.client.post("/v1/moderations", json={"input": "x"}), 401, "unauthorized", "authentication_error")
    api.put_plan("tiny", scope="both", monthly_quota=1, rate_per_second=50, burst=50, image_max_bytes=100, text_max_chars=5)
    headers = api.new_key(account="tiny", plan="tiny")
    assert_openai_error(moderations(api, headers, "123456"), 413, "text_too_long")
    image = [{"type": "image_url", "image_url": {"url": PNG_URL}}]
    assert_openai_error(moderations(api, headers, image), 413, "image_too_large")
    assert moderations(api, headers, "ok").status_code == 200
    assert_openai_error(moderations(api, headers, "ok"), 402, "quota_exceeded", "insufficient_quota")
    assert_openai_error(moderations(api, api.new_key(plan="images-only"), "x"), 403, "capability_required", "permission_error")


def test_the_native_routes_keep_their_own_error_shape(api):
    assert set(api.client.post("/v1/moderate-text", json={"text": "x"}).json()["error"]) == {"code", "message"}


@pytest.fixture
def sdk(api, key):
    # The real SDK, its requests sent through the in-process app (TestClient is an httpx.Client).
    return openai.OpenAI(api_key=key["Authorization"].split()[1], base_url="http://testserver/v1",
                         http_client=api.client, max_retries=0)  # fmt: skip


def test_the_openai_sdk_parses_answers_and_errors(sdk, backends):
    backends.toxic = 0.9
    answer = sdk.moderations.create(input=["you idiot", "idiot"], model="omni-moderation-latest")
    assert [r.flagged for r in answer.results] == [True, True]
    assert answer.results[0].categories.harassment and answer.results[0].category_scores.harassment == pytest.approx(0.9)
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.moderations.create(input="x", model="gpt-9")
    assert refused.value.code == "model_not_found" and refused.value.type == "invalid_request_error"


@pytest.mark.parametrize("input", ["\ud800", ["fine", "bad \udfff"], [{"type": "text", "text": "\ud800"}]])
def test_a_lone_surrogate_is_400_before_any_unit_or_model_call(api, key, backends, input):
    # It would fail the model's shared batch, and every other tenant's text in it, if it got that far.
    body = json.dumps({"input": input})  # ASCII JSON: the surrogate travels as its escape, as a client may send it
    response = api.client.post("/v1/moderations", headers={**key, "Content-Type": "application/json"}, content=body)
    assert "not valid Unicode" in assert_openai_error(response, 400, "invalid_request")
    assert usage(api) == 0 and backends.text_calls == []
