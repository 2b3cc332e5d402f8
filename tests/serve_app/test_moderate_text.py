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
