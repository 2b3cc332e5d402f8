"""The admin API: its own app (listener), guarded by MODERATION_ADMIN_TOKEN, throttled on wrong tokens."""

from __future__ import annotations

import json

import pytest
import redis
from fastapi.testclient import TestClient
from support.api import ADMIN_TOKEN, StubBackends, assert_error

from admin.guard import MAX_FAILURES, AdminGuard
from admin.app import create_admin_app
from serve_app.app import create_app
from serve_app.errors import ApiError
from serve_app.services import Services

from policy.types import MAX_IMAGE_BYTES, MAX_TEXT_CHARS
from store import redis_keys

PLAN = {"scope": "text", "monthly_quota": 10, "rate_per_second": 1, "burst": 1}


def test_the_public_app_never_serves_the_admin_api(redis_url):
    services = Services.connect(redis_url, StubBackends())
    with TestClient(create_app(services)) as client:
        response = client.get("/admin/v1/plans/default", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert_error(response, 404, "not_found")
        assert not [path for path in client.get("/openapi.json").json()["paths"] if path.startswith("/admin")]


def from_addresses(app):
    """The app, seeing each request come from the address in its X-Test-Client header (one event loop for all)."""

    async def wrapped(scope, receive, send):
        headers = dict(scope.get("headers") or [])
        address = headers.get(b"x-test-client", b"testclient").decode()
        await app({**scope, "client": (address, 5000)}, receive, send)

    return wrapped


class AsAddress:
    def __init__(self, client: TestClient, address: str):
        self.client, self.address = client, address

    def __getattr__(self, method: str):
        def send(url, headers=None, **kwargs):
            return getattr(self.client, method)(url, headers={**(headers or {}), "X-Test-Client": self.address}, **kwargs)

        return send


def test_a_source_sending_wrong_tokens_is_throttled_and_the_right_token_is_served_from_anywhere(redis_url):
    """Ten wrong tokens used to pause the admin API for everyone, the right token included."""
    services = Services.connect(redis_url, StubBackends())
    right = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    wrong = {"Authorization": "Bearer guess"}
    with TestClient(from_addresses(create_admin_app(services, ADMIN_TOKEN))) as client:
        guesser, other = AsAddress(client, "10.0.0.66"), AsAddress(client, "10.0.0.7")
        for _ in range(MAX_FAILURES):
            assert_error(guesser.get("/admin/v1/plans/default", headers=wrong), 401, "unauthorized")
        throttled = guesser.get("/admin/v1/plans/default", headers=wrong)
        assert_error(throttled, 429, "rate_limited")
        assert 1 <= int(throttled.headers["retry-after"]) <= 60
        # The right token is served from the throttled address itself (loopback: the operator shares it) ...
        assert guesser.get("/admin/v1/plans/nope", headers=right).status_code == 404
        assert guesser.put("/admin/v1/plans/p1", json=PLAN, headers=right).status_code == 200
        # ... and from any other address, whose own wrong tokens still get 401, not the guesser's 429.
        assert other.get("/admin/v1/plans/p1", headers=right).status_code == 200
        assert_error(other.get("/admin/v1/plans/default", headers=wrong), 401, "unauthorized")
        assert_error(guesser.get("/admin/v1/plans/default", headers=wrong), 429, "rate_limited")


def test_an_ipv6_guesser_is_throttled_by_its_64_whichever_of_its_addresses_it_uses(redis_url):
    services = Services.connect(redis_url, StubBackends())
    wrong = {"Authorization": "Bearer guess"}
    with TestClient(from_addresses(create_admin_app(services, ADMIN_TOKEN))) as client:
        for n in range(MAX_FAILURES):  # a fresh address of one /64 for every guess
            guess = AsAddress(client, f"2001:db8:66::{n + 1:x}").get("/admin/v1/plans/default", headers=wrong)
            assert_error(guess, 401, "unauthorized")
        assert_error(AsAddress(client, "2001:db8:66::ffff").get("/admin/v1/plans/default", headers=wrong),
                     429, "rate_limited")  # fmt: skip
        other_network = AsAddress(client, "2001:db8:67::1").get("/admin/v1/plans/default", headers=wrong)
        assert_error(other_network, 401, "unauthorized")


def test_the_throttle_ends_when_the_window_has_room_again():
    now = [0.0]
    guard = AdminGuard("t" * 32, max_failures=2, window_s=60, clock=lambda: now[0])
    for _ in range(2):
        with pytest.raises(ApiError) as refused:
            guard.check("guess", "10.0.0.1")
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with pytest.raises(ApiError) as refused:
        guard.check("guess", "10.0.0.1")
    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    guard.check("t" * 32, "10.0.0.1")  # the right token, even now
    now[0] = 60.5
    with pytest.raises(ApiError) as refused:
        guard.check("guess", "10.0.0.1")
    assert refused.value.status == 401


def test_the_throttle_tracks_a_bounded_number_of_sources():
    guard = AdminGuard("t" * 32, max_failures=1, window_s=60, clock=lambda: 0.0, max_sources=3)
    for n in range(50):
        with pytest.raises(ApiError):
            guard.check("guess", f"10.0.1.{n}")
    assert len(guard._failures) == 3
    with pytest.raises(ApiError) as refused:
        guard.check("guess", "10.0.1.49")  # still tracked: throttled
    assert refused.value.status == 429


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


@pytest.mark.parametrize("number", ["1e999", "-1e999", "Infinity", "NaN"])
@pytest.mark.parametrize("field", ["rate_per_second", "monthly_quota", "burst"])
def test_a_non_finite_number_in_a_plan_is_400_and_nothing_is_stored(api, field, number):
    plan = {"scope": "both", "monthly_quota": 10, "rate_per_second": 1, "burst": 1}
    body = json.dumps(plan).replace(f'"{field}": {plan[field]}', f'"{field}": {number}')
    response = api.client.put("/admin/v1/plans/unbounded", content=body, headers={**api.admin,
                                                                                   "content-type": "application/json"})
    assert_error(response, 400, "invalid_request")
    assert_error(api.client.get("/admin/v1/plans/unbounded", headers=api.admin), 404, "not_found")


@pytest.mark.parametrize("number", ["1e999", "NaN"])
def test_a_non_finite_threshold_or_report_threshold_in_a_profile_is_400(api, number):
    categories = {"nsfw": {"review": 0.1, "block": 0.2}, "toxic": {"review": 0.3, "block": number}}
    body = json.dumps({"mode": "enforce", "categories": categories}).replace(f'"{number}"', number)
    response = api.client.put("/admin/v1/profiles/odd", content=body, headers={**api.admin,
                                                                               "content-type": "application/json"})
    assert_error(response, 400, "invalid_request")


def test_a_plan_stored_unreadable_before_the_fix_refuses_its_keys_only_until_it_is_saved_again(api, redis_url):
    api.put_plan("broken", scope="both", monthly_quota=100, rate_per_second=1, burst=5)
    broken_key, fine_key = api.new_key(plan="broken"), api.new_key(plan="default")
    # What an earlier version stored for a rate of inf: null.
    plan = {"name": "broken", "scope": "both", "monthly_quota": 100, "rate_per_second": None, "burst": 5}
    with redis.Redis.from_url(redis_url) as store:
        store.set(redis_keys.plan("broken"), json.dumps(plan))
    assert_error(api.moderate_text(broken_key), 503, "store_unavailable")
    assert api.moderate_text(fine_key).status_code == 200
    assert_error(api.client.get("/admin/v1/plans/broken", headers=api.admin), 503, "store_unavailable")
    api.put_plan("broken", scope="both", monthly_quota=100, rate_per_second=1, burst=5)  # saved again: repaired
    assert api.moderate_text(broken_key).status_code == 200
