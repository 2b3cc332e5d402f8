"""The admin API: its own app (listener), guarded by MODERATION_ADMIN_TOKEN, throttled on wrong tokens."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.api import ADMIN_TOKEN, StubBackends, assert_error

from serve_app.admin_guard import MAX_FAILURES, AdminGuard
from serve_app.app import create_admin_app, create_app
from serve_app.errors import ApiError
from serve_app.services import Services

from policy.types import MAX_IMAGE_BYTES, MAX_TEXT_CHARS


def test_the_public_app_never_serves_the_admin_api(redis_url):
    services = Services.connect(redis_url, StubBackends())
    with TestClient(create_app(services)) as client:
        response = client.get("/admin/v1/plans/default", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert_error(response, 404, "not_found")
        assert not [path for path in client.get("/openapi.json").json()["paths"] if path.startswith("/admin")]


def test_wrong_tokens_pause_the_admin_api_even_for_the_right_token(redis_url):
    services = Services.connect(redis_url, StubBackends())
    with TestClient(create_admin_app(services, ADMIN_TOKEN)) as client:
        right = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert client.get("/admin/v1/plans/nope", headers=right).status_code == 404
        for _ in range(MAX_FAILURES):
            assert_error(client.get("/admin/v1/plans/default", headers={"Authorization": "Bearer guess"}), 401,
                         "unauthorized")
        paused = client.get("/admin/v1/plans/nope", headers=right)
        assert_error(paused, 429, "rate_limited")
        assert 1 <= int(paused.headers["retry-after"]) <= 60


def test_the_pause_ends_when_the_window_has_room_again():
    now = [0.0]
    guard = AdminGuard("t" * 32, max_failures=2, window_s=60, clock=lambda: now[0])
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            guard.check("guess")
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with pytest.raises(ApiError) as refused:
        guard.check("t" * 32)
    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    now[0] = 60.5
    guard.check("t" * 32)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}])
def test_admin_api_needs_the_token(api, headers):
    assert_error(api.client.get("/admin/v1/plans/default", headers=headers), 401, "unauthorized")


def test_a_customer_key_is_not_an_admin_token(api, key):
    assert_error(api.client.get("/admin/v1/plans/default", headers=key), 401, "unauthorized")


def test_plan_round_trips(api):
    api.put_plan("gold", scope="text", monthly_quota=5, rate_per_second=2.5, burst=3, text_max_chars=99)
    body = api.client.get("/admin/v1/plans/gold", headers=api.admin).json()
    assert body["scope"] == "text" and body["text_max_chars"] == 99 and body["image_max_bytes"] == 10 * 1024 * 1024


def test_profile_round_trips(api):
    categories = {"nsfw": {"review": 0.1, "block": 0.2}, "toxic": {"review": 0.3, "block": 0.4},
                  "weapon": {"enabled": True, "review": 0.5, "block": 0.6}}
    api.put_profile("site-b", mode="review", report_threshold=7, categories=categories)
    body = api.client.get("/admin/v1/profiles/site-b", headers=api.admin).json()
    assert body["mode"] == "review" and body["report_threshold"] == 7
    assert body["categories"]["weapon"] == {"enabled": True, "review": 0.5, "block": 0.6}


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "loud", "categories": {}},
        {"mode": "enforce", "categories": {"nsfw": {"review": 0.9, "block": 0.1}, "toxic": {"review": 0.1, "block": 0.2}}},
        {"mode": "enforce", "categories": {"nsfw": {"review": 0.1, "block": 0.2}}},
        {"mode": "enforce", "categories": {"gore": {"review": 0.1, "block": 0.2}}},
    ],
)
def test_invalid_profile_is_400(api, body):
    response = api.client.put("/admin/v1/profiles/bad", json=body, headers=api.admin)
    assert_error(response, 400, "invalid_request")


def test_invalid_plan_is_400(api):
    response = api.client.put("/admin/v1/plans/bad", json={"scope": "video"}, headers=api.admin)
    assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize("field, largest", [("image_max_bytes", MAX_IMAGE_BYTES), ("text_max_chars", MAX_TEXT_CHARS)])
def test_a_plan_limit_above_the_largest_an_operator_may_set_is_400(api, field, largest):
    plan = {"scope": "both", "monthly_quota": 10, "rate_per_second": 1, "burst": 1}
    assert_error(api.client.put("/admin/v1/plans/big", json={**plan, field: largest + 1}, headers=api.admin),
                 400, "invalid_request")
    api.put_plan("big", **plan, **{field: largest})  # the largest itself is allowed


def test_unknown_plan_or_profile_is_404(api):
    assert_error(api.client.get("/admin/v1/plans/nope", headers=api.admin), 404, "not_found")
    assert_error(api.client.get("/admin/v1/profiles/nope", headers=api.admin), 404, "not_found")


def test_created_key_shows_its_secret_once(api):
    created = api.client.post(
        "/admin/v1/keys", json={"account": "a", "profile": "default", "plan": "default"}, headers=api.admin
    )
    assert created.status_code == 201
    body = created.json()
    assert set(body) == {"id", "key", "account", "profile", "plan"}
    fetched = api.client.get(f"/admin/v1/keys/{body['id']}", headers=api.admin).json()
    assert body["key"] not in str(fetched)


def test_key_for_an_unknown_plan_is_refused(api):
    response = api.client.post(
        "/admin/v1/keys", json={"account": "a", "profile": "default", "plan": "nope"}, headers=api.admin
    )
    assert_error(response, 400, "invalid_request")


def test_revoking_an_unknown_key_is_404(api):
    assert_error(api.client.delete("/admin/v1/keys/key_000000000000", headers=api.admin), 404, "not_found")


def test_reviews_list_filters_by_status_and_account(api, backends):
    backends.image_scores = {"nsfw": 0.5}
    alpha, beta = api.new_key(account="alpha"), api.new_key(account="beta")
    first = api.moderate(alpha).json()["review_id"]
    api.moderate(alpha)
    api.moderate(beta)
    api.client.post(f"/admin/v1/reviews/{first}/decision", json={"status": "approved"}, headers=api.admin)
    listed = lambda **q: api.client.get("/admin/v1/reviews", params=q, headers=api.admin).json()["items"]
    assert len(listed(account="alpha")) == 2
    assert [i["id"] for i in listed(account="alpha", status="approved")] == [first]
    assert len(listed(status="pending")) == 2


def test_decision_must_be_approved_or_rejected(api, key, backends):
    backends.image_scores = {"nsfw": 0.5}
    review_id = api.moderate(key).json()["review_id"]
    response = api.client.post(f"/admin/v1/reviews/{review_id}/decision", json={"status": "pending"}, headers=api.admin)
    assert_error(response, 400, "invalid_request")


def test_account_usage_counts_this_months_moderation_requests(api):
    headers = api.new_key(account="metered")
    for _ in range(3):
        api.moderate_text(headers)
    api.report(headers, "not-counted")
    usage = api.client.get("/admin/v1/accounts/metered/usage", headers=api.admin).json()
    assert usage["used"] == 3 and usage["account"] == "metered" and len(usage["month"]) == 7
