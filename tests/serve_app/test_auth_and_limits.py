"""Keys, account isolation, quota, rate limit and failing closed ."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.api import StubBackends, assert_error

from serve_app.app import create_app
from serve_app.services import Services


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer "}],
)
@pytest.mark.parametrize("call", ["image", "text", "report", "review"])
def test_missing_or_invalid_key_is_401_on_every_endpoint(api, headers, call):
    response = {
        "image": lambda: api.moderate(headers),
        "text": lambda: api.moderate_text(headers),
        "report": lambda: api.report(headers, "r1"),
        "review": lambda: api.client.get("/v1/review/1", headers=headers),
    }[call]()
    assert_error(response, 401, "unauthorized")


def test_revoked_key_is_401(api):
    body = api.client.post(
        "/admin/v1/keys", json={"account": "a", "profile": "default", "plan": "default"}, headers=api.admin
    ).json()
    headers = {"Authorization": f"Bearer {body['key']}"}
    assert api.moderate_text(headers).status_code == 200
    assert api.client.delete(f"/admin/v1/keys/{body['id']}", headers=api.admin).status_code == 204
    assert_error(api.moderate_text(headers), 401, "unauthorized")


def test_quota_exhaustion_is_402_and_reports_do_not_count(api, backends):
    api.put_plan("three", scope="both", monthly_quota=3, rate_per_second=100, burst=100)
    headers = api.new_key(plan="three", account="small-co")
    for i in range(5):
        assert api.report(headers, f"ref-{i}").status_code == 200
    assert [api.moderate_text(headers).status_code for _ in range(3)] == [200, 200, 200]
    assert_error(api.moderate_text(headers), 402, "quota_exceeded")
    assert_error(api.moderate(headers), 402, "quota_exceeded")
    assert len(backends.text_calls) == 3  # the model never ran for a refused request


def test_quota_is_per_account_not_per_key(api):
    api.put_plan("two", scope="both", monthly_quota=2, rate_per_second=100, burst=100)
    first, second = api.new_key(plan="two", account="shared"), api.new_key(plan="two", account="shared")
    assert api.moderate_text(first).status_code == 200
    assert api.moderate_text(second).status_code == 200
    assert_error(api.moderate_text(first), 402, "quota_exceeded")
    assert api.moderate_text(api.new_key(plan="two", account="other")).status_code == 200


def test_failed_inference_gives_its_quota_unit_back(api, backends):
    api.put_plan("one", scope="both", monthly_quota=1, rate_per_second=100, burst=100)
    headers = api.new_key(plan="one")
    backends.failing = True
    assert_error(api.moderate_text(headers), 503, "inference_unavailable")
    assert_error(api.moderate(headers), 503, "inference_unavailable")
    backends.failing = False
    assert api.moderate_text(headers).status_code == 200


def test_invalid_input_does_not_use_quota(api):
    api.put_plan("one", scope="both", monthly_quota=1, rate_per_second=100, burst=100)
    headers = api.new_key(plan="one")
    assert api.moderate(headers, b"garbage").status_code == 400
    assert api.moderate_text(headers).status_code == 200


@pytest.mark.parametrize("call", ["image", "text", "report", "review"])
def test_rate_limit_is_429_with_retry_after_on_every_endpoint(api, call):
    api.put_plan("slow", scope="both", monthly_quota=100, rate_per_second=0.01, burst=2)
    headers = api.new_key(plan="slow")
    send = {
        "image": lambda: api.moderate(headers),
        "text": lambda: api.moderate_text(headers),
        "report": lambda: api.report(headers, "r"),
        "review": lambda: api.client.get("/v1/review/999", headers=headers),
    }[call]
    assert send().status_code != 429
    assert send().status_code != 429
    response = send()
    assert_error(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) >= 1


def test_review_item_of_another_account_is_404(api, backends):
    backends.image_scores = {"nsfw": 0.5}
    mine, theirs = api.new_key(account="alpha"), api.new_key(account="beta")
    review_id = api.moderate(mine).json()["review_id"]
    assert api.client.get(f"/v1/review/{review_id}", headers=mine).status_code == 200
    assert_error(api.client.get(f"/v1/review/{review_id}", headers=theirs), 404, "not_found")


@pytest.mark.parametrize("item_id", ["999999", "abc", "-1"])
def test_unknown_review_item_is_404(api, key, item_id):
    assert_error(api.client.get(f"/v1/review/{item_id}", headers=key), 404, "not_found")


def test_store_down_fails_closed_with_503():
    dead = Services.connect("redis://127.0.0.1:1/0", StubBackends())
    with TestClient(create_app(dead), raise_server_exceptions=False) as client:
        response = client.post(
            "/v1/moderate-text", json={"text": "hi"}, headers={"Authorization": "Bearer anything"}
        )
    assert_error(response, 503, "store_unavailable")
    assert int(response.headers["Retry-After"]) >= 1


def test_errors_carry_no_traceback(api, key):
    response = api.moderate(key, b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    assert response.status_code == 400
    assert "Traceback" not in response.text
