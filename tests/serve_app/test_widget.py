"""The widget's API (serve_app/routes_widget.py) against a real store: tokens minted with the server key, checks from
the allowed origins only, within the token's budget and the key's plan, and verdicts the site's backend redeems once
for exactly the content it received."""

from __future__ import annotations

import time

import pytest
import redis
from support.api import Api, photo_bytes, seeded_api

from policy.widget_verdicts import VERDICT_LIFETIME_S, bytes_sha256, text_sha256
from runtime.haproxy_rules import CLIENT_ADDRESS_HEADER
from serve_app import routes_widget
from serve_app.services import Services
from store.widget import tokens as widget_store

SITE = "https://comments.example"
OTHER_SITE = "https://evil.example"


def make_key(api: Api, origins: list[str] | None = None, **key_fields) -> tuple[str, dict]:
    body = {"account": "acme", "profile": "default", "plan": "default", **key_fields}
    created = api.client.post("/admin/v1/keys", json=body, headers=api.admin).json()
    if origins is not None:
        response = api.client.put(f"/admin/v1/keys/{created['id']}/widget", json={"origins": origins},
                                  headers=api.admin)  # fmt: skip
        assert response.status_code == 200, response.text
    return created["id"], {"Authorization": f"Bearer {created['key']}"}


def mint(api: Api, server_key: dict, **fields) -> str:
    response = api.client.post("/v1/widget/tokens", json=fields, headers=server_key)
    assert response.status_code == 200, response.text
    return response.json()["token"]


def check_text(api: Api, token: str, text: str, origin: str | None = SITE):
    headers = {"Authorization": f"Bearer {token}", **({"Origin": origin} if origin else {})}
    return api.client.post("/v1/widget/check-text", json={"text": text}, headers=headers)


def redeem(api: Api, server_key: dict, verdict: str, content_sha256: str, kind: str = "text"):
    body = {"verdict": verdict, "kind": kind, "content_sha256": content_sha256}
    return api.client.post("/v1/widget/verdicts/redeem", json=body, headers=server_key)


@pytest.fixture
def site(api: Api) -> tuple[str, dict, str]:
    """A key that allows SITE, and a fresh token of it."""
    key_id, server_key = make_key(api, [SITE])
    return key_id, server_key, mint(api, server_key)


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_a_token_is_minted_with_the_server_key_only(api: Api):
    _, server_key = make_key(api, [SITE])
    assert_error(api.client.post("/v1/widget/tokens", json={}), 401, "unauthorized")
    body = api.client.post("/v1/widget/tokens", headers=server_key).json()  # no body: the defaults
    assert body["token"].startswith("wt_") and body["uses"] == 20 and body["origins"] == [SITE]
    assert 29 * 60 < body["expires_at"] - time.time() <= 30 * 60


def test_a_key_without_allowed_origins_gets_no_token(api: Api):
    _, server_key = make_key(api)
    assert_error(api.client.post("/v1/widget/tokens", json={}, headers=server_key), 403, "widget_not_enabled")


@pytest.fixture
def capped_api(redis_url: str, backends):
    """The app with a cap of two live widget tokens per key (MODERATION_WIDGET_LIVE_TOKENS_PER_KEY)."""
    with seeded_api(Services.connect(redis_url, backends, widget_live_tokens_per_key=2), backends) as api:
        yield api


def test_a_key_mints_no_token_past_its_cap_of_live_ones(capped_api: Api):
    _, server_key = make_key(capped_api, [SITE])
    mint(capped_api, server_key, minutes=1)
    mint(capped_api, server_key)
    refused = capped_api.client.post("/v1/widget/tokens", json={}, headers=server_key)
    assert_error(refused, 429, "too_many_widget_tokens")
    assert 1 <= int(refused.headers["retry-after"]) <= 60  # when the 1-minute token expires
    _, other_key = make_key(capped_api, [SITE], account="other")
    mint(capped_api, other_key)  # the cap is the key's own


def test_a_kind_comment_from_the_allowed_origin_is_allowed_with_a_verdict_readable_there(api: Api, site):
    _, server_key, token = site
    response = check_text(api, token, "What a lovely photo!")
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == SITE
    assert "access-control-allow-credentials" not in response.headers
    body = response.json()
    assert (body["decision"], body["may_post"], body["uses_left"]) == ("allow", True, 19)
    redeemed = redeem(api, server_key, body["verdict"], text_sha256("What a lovely photo!"))
    assert redeemed.status_code == 200, redeemed.text
    assert redeemed.json()["decision"] == "allow" and redeemed.json()["origin"] == SITE


@pytest.mark.parametrize(("toxic", "decision", "may_post"), [(0.6, "review", True), (0.9, "block", False)])
def test_a_hurtful_comment_is_warned_about_as_the_profile_says(api: Api, site, toxic, decision, may_post):
    api.backends.toxic = toxic
    body = check_text(api, site[2], "You are an idiot.").json()
    assert (body["decision"], body["may_post"]) == (decision, may_post)


def test_a_photo_is_checked_and_its_verdict_is_bound_to_its_bytes(api: Api, site):
    _, server_key, token = site
    photo = photo_bytes()
    response = api.client.post("/v1/widget/check-image", files={"image": ("p.png", photo, "image/png")},
                               headers={"Authorization": f"Bearer {token}", "Origin": SITE})  # fmt: skip
    assert response.status_code == 200, response.text
    verdict = response.json()["verdict"]
    assert_error(redeem(api, server_key, verdict, bytes_sha256(photo + b"x"), "image"), 409, "verdict_content_mismatch")
    assert redeem(api, server_key, verdict, bytes_sha256(photo), "image").json()["kind"] == "image"


def test_a_texts_verdict_is_refused_for_the_same_bytes_posted_as_a_photo(api: Api, site):
    """An ASCII-only image file (a PBM) sent to check-text gets a text's `allow`: the photo it is was never checked."""
    _, server_key, token = site
    image_as_text = "P1\n2 2\n0 1\n1 0\n"
    verdict = check_text(api, token, image_as_text).json()["verdict"]
    same_bytes = bytes_sha256(image_as_text.encode())
    assert_error(redeem(api, server_key, verdict, same_bytes, "image"), 409, "verdict_kind_mismatch")
    # A refused redemption spends nothing: redeemed as the text it was checked as, it passes.
    assert redeem(api, server_key, verdict, same_bytes, "text").json()["kind"] == "text"


def test_a_redemption_that_does_not_say_the_kind_is_refused(api: Api, site):
    _, server_key, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    body = {"verdict": verdict, "content_sha256": text_sha256("hello")}
    assert_error(api.client.post("/v1/widget/verdicts/redeem", json=body, headers=server_key), 400, "invalid_request")
    assert_error(redeem(api, server_key, verdict, text_sha256("hello"), "video"), 400, "invalid_request")


def test_a_check_from_an_origin_the_key_does_not_allow_is_refused_unreadably(api: Api, site):
    response = check_text(api, site[2], "hello", origin=OTHER_SITE)
    assert_error(response, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in response.headers
    assert_error(check_text(api, site[2], "hello", origin=None), 403, "origin_not_allowed")


def test_a_key_without_its_plan_refuses_another_origin_unreadably(api: Api, redis_url: str):
    """The origin is checked before the key's plan and profile: a page of another origin never reads an answer, not
    even that the key is misconfigured."""
    api.put_plan("short-lived", scope="both", monthly_quota=100, rate_per_second=100, burst=100)
    _, server_key = make_key(api, [SITE], plan="short-lived")
    token = mint(api, server_key)
    with redis.Redis.from_url(redis_url) as store:
        store.delete("mod:plan:short-lived")
    refused = check_text(api, token, "hello", origin=OTHER_SITE)
    assert_error(refused, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in refused.headers
    unconfigured = check_text(api, token, "hello")
    assert_error(unconfigured, 503, "store_unavailable")
    assert unconfigured.headers["access-control-allow-origin"] == SITE  # its own page may tell it from an outage


def test_the_preflight_is_answered_for_allowed_origins_only(api: Api, site):
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
    allowed = api.client.options("/v1/widget/check-text", headers={"Origin": SITE, **ask})
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == SITE
    assert "authorization" in allowed.headers["access-control-allow-headers"]
    assert "access-control-allow-credentials" not in allowed.headers
    refused = api.client.options("/v1/widget/check-image", headers={"Origin": OTHER_SITE, **ask})
    assert_error(refused, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in refused.headers


def test_the_server_key_is_no_widget_token(api: Api, site):
    _, server_key, _ = site
    assert_error(check_text(api, server_key["Authorization"].split()[1], "hello"), 401, "unauthorized")


def test_a_token_is_check_only(api: Api, site):
    token = {"Authorization": f"Bearer {site[2]}"}
    assert api.client.post("/v1/moderate-text", json={"text": "hi"}, headers=token).status_code == 401
    assert api.client.get("/v1/review/1", headers=token).status_code == 401
    assert api.client.post("/v1/report", files={"reference": (None, "r")}, headers=token).status_code == 401
    assert api.client.post("/v1/widget/tokens", json={}, headers=token).status_code == 401
    assert api.client.post("/v1/widget/verdicts/redeem", json={}, headers=token).status_code == 401


def test_a_token_stops_at_its_use_budget(api: Api):
    _, server_key = make_key(api, [SITE])
    token = mint(api, server_key, uses=2)
    assert [check_text(api, token, "hello").status_code for _ in range(2)] == [200, 200]
    assert_error(check_text(api, token, "hello"), 403, "widget_token_spent")


def test_an_expired_token_is_refused(api: Api, redis_url: str, site):
    with redis.Redis.from_url(redis_url) as store:
        tokens = list(store.scan_iter("mod:widget:token:*"))
        assert len(tokens) == 1
        store.delete(*tokens)  # what its EXPIREAT does when its minutes are up
    assert_error(check_text(api, site[2], "hello"), 401, "unauthorized")


def test_a_revoked_keys_tokens_stop_at_once_and_its_origins_go(api: Api, site):
    key_id, _, token = site
    api.client.delete(f"/admin/v1/keys/{key_id}", headers=api.admin)
    assert_error(check_text(api, token, "hello"), 401, "unauthorized")
    assert_error(api.client.options("/v1/widget/check-text", headers={"Origin": SITE}), 403, "origin_not_allowed")


def test_an_origin_the_operator_removes_is_refused_from_the_next_check(api: Api, site):
    key_id, _, token = site
    assert check_text(api, token, "hello").status_code == 200
    api.client.put(f"/admin/v1/keys/{key_id}/widget", json={"origins": ["https://new.example"]}, headers=api.admin)
    assert_error(check_text(api, token, "hello"), 403, "origin_not_allowed")


def test_checks_from_one_address_are_rate_limited(api: Api, site, monkeypatch):
    monkeypatch.setattr(widget_store, "ADDRESS_BURST", 2)
    monkeypatch.setattr(widget_store, "ADDRESS_RATE_PER_S", 0.01)
    assert [check_text(api, site[2], "hello").status_code for _ in range(2)] == [200, 200]
    refused = check_text(api, site[2], "hello")
    assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["access-control-allow-origin"] == SITE  # the widget can tell a refusal from an outage


def test_widget_checks_count_against_the_keys_quota(api: Api):
    api.put_plan("tiny", scope="both", monthly_quota=1, rate_per_second=100, burst=100)
    _, server_key = make_key(api, [SITE], plan="tiny")
    token = mint(api, server_key)
    assert check_text(api, token, "hello").status_code == 200
    assert_error(check_text(api, token, "hello"), 402, "quota_exceeded")


def test_widget_checks_take_the_keys_rate_tokens(api: Api):
    api.put_plan("slow", scope="both", monthly_quota=100, rate_per_second=0.01, burst=2)
    _, server_key = make_key(api, [SITE], plan="slow")
    token = mint(api, server_key)  # the mint takes one of the two tokens
    assert check_text(api, token, "hello").status_code == 200
    refused = check_text(api, token, "hello")
    assert_error(refused, 429, "rate_limited")
    assert check_text(api, token, "x").json()["error"]["code"] == "rate_limited"


def test_a_plan_without_images_refuses_a_photo_check(api: Api):
    api.put_plan("texts", scope="text", monthly_quota=100, rate_per_second=100, burst=100)
    _, server_key = make_key(api, [SITE], plan="texts")
    token = mint(api, server_key)
    response = api.client.post("/v1/widget/check-image", files={"image": ("p.png", photo_bytes(), "image/png")},
                               headers={"Authorization": f"Bearer {token}", "Origin": SITE})  # fmt: skip
    assert_error(response, 403, "capability_required")


def test_a_verdict_is_redeemed_once(api: Api, site):
    _, server_key, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    assert redeem(api, server_key, verdict, text_sha256("hello")).status_code == 200
    assert_error(redeem(api, server_key, verdict, text_sha256("hello")), 409, "verdict_used")


def test_a_verdict_is_redeemed_only_for_its_own_content(api: Api, site):
    _, server_key, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    assert_error(redeem(api, server_key, verdict, text_sha256("you idiot")), 409, "verdict_content_mismatch")
    # A refused redemption spends nothing: the right content still redeems it.
    assert redeem(api, server_key, verdict, text_sha256("hello").upper()).status_code == 200


def test_a_verdict_is_redeemed_only_by_its_own_key(api: Api, site):
    _, _, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    _, other_key = make_key(api, [SITE], account="other")
    assert_error(redeem(api, other_key, verdict, text_sha256("hello")), 403, "verdict_wrong_key")


def test_an_expired_verdict_is_refused(api: Api, site, monkeypatch):
    _, server_key, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    later = time.time() + VERDICT_LIFETIME_S + 1
    monkeypatch.setattr(routes_widget.time, "time", lambda: later)
    assert_error(redeem(api, server_key, verdict, text_sha256("hello")), 410, "verdict_expired")


def test_a_tampered_verdict_is_refused(api: Api, site):
    _, server_key, token = site
    verdict = check_text(api, token, "hello").json()["verdict"]
    version, payload, signature = verdict.split(".")
    tampered = f"{version}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{signature}"
    assert_error(redeem(api, server_key, tampered, text_sha256("hello")), 400, "invalid_verdict")


@pytest.mark.parametrize("body", [b"not json", b'{"text": 5}', b'{"text": "hi", "extra": 1}', b"[]", b"{}"])
def test_a_malformed_check_is_a_400(api: Api, site, body):
    response = api.client.post("/v1/widget/check-text", content=body, headers={
        "Authorization": f"Bearer {site[2]}", "Origin": SITE, "Content-Type": "application/json"})  # fmt: skip
    assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize("body", [{"minutes": 0}, {"minutes": 100_000}, {"uses": 0}, {"uses": "many"}, {"x": 1}])
def test_a_malformed_token_request_is_a_400(api: Api, site, body):
    assert_error(api.client.post("/v1/widget/tokens", json=body, headers=site[1]), 400, "invalid_request")


@pytest.mark.parametrize("body", [{}, {"verdict": "v1.a.b"}, {"verdict": "v1.a.b", "content_sha256": "zz"},
                                  {"verdict": "", "content_sha256": "0" * 64}])  # fmt: skip
def test_a_malformed_redemption_is_a_400(api: Api, site, body):
    assert_error(api.client.post("/v1/widget/verdicts/redeem", json=body, headers=site[1]), 400, "invalid_request")


def test_a_photo_check_without_a_photo_is_a_400(api: Api, site):
    response = api.client.post("/v1/widget/check-image", files={"reference": (None, "x")},
                               headers={"Authorization": f"Bearer {site[2]}", "Origin": SITE})  # fmt: skip
    assert_error(response, 400, "no_image")


def test_nothing_the_widget_sends_is_stored(api: Api, redis_url: str, site):
    text = "a kind comment 7f3a9c"
    assert check_text(api, site[2], text).json()["decision"] == "allow"
    with redis.Redis.from_url(redis_url) as store:
        for key in store.scan_iter("*"):
            dumped = store.dump(key) or b""
            assert text.encode() not in dumped and b"7f3a9c" not in key


def test_operators_set_origins_and_see_widget_use(api: Api, site):
    key_id, _, token = site
    check_text(api, token, "hello")
    check_text(api, token, "hello", origin=OTHER_SITE)
    settings = api.client.get(f"/admin/v1/keys/{key_id}/widget", headers=api.admin).json()
    assert settings["origins"] == [SITE]
    assert settings["use"] == {"tokens": 1, "checks": 1, "refused_origin": 1, "refused_spent": 0,
                               "refused_address": 0}  # fmt: skip
    bad = api.client.put(f"/admin/v1/keys/{key_id}/widget", json={"origins": ["https://x.example/path"]},
                         headers=api.admin)  # fmt: skip
    assert_error(bad, 400, "invalid_request")
    missing = api.client.get("/admin/v1/keys/key_nope/widget", headers=api.admin)
    assert_error(missing, 404, "not_found")


def test_the_widget_script_is_served_small_and_as_javascript(api: Api):
    response = api.client.get("/v1/widget.js")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/javascript")
    assert len(response.content) < 8 * 1024


# Behind HAProxy the address it sends counts, with its secret: tests/serve_app/test_client_address.py.
def test_without_the_proxy_a_client_cannot_choose_its_address(api: Api, site, monkeypatch):
    monkeypatch.setattr(widget_store, "ADDRESS_BURST", 1)
    monkeypatch.setattr(widget_store, "ADDRESS_RATE_PER_S", 0.01)
    statuses = [api.client.post("/v1/widget/check-text", json={"text": "hi"}, headers={
        "Authorization": f"Bearer {site[2]}", "Origin": SITE, CLIENT_ADDRESS_HEADER: f"203.0.113.{n}"}).status_code
        for n in range(2)]  # fmt: skip
    assert statuses == [200, 429]


def test_an_oversized_redemption_or_token_request_is_a_400_not_a_413(api: Api, site):
    # Found by the OpenAPI fuzzer: the body limit of these small JSON bodies answered 413 text_too_long.
    body = {"verdict": "v" * 5000, "content_sha256": "0" * 64}
    assert_error(api.client.post("/v1/widget/verdicts/redeem", json=body, headers=site[1]), 400, "invalid_request")
    assert_error(api.client.post("/v1/widget/tokens", json={"x": "y" * 5000}, headers=site[1]), 400, "invalid_request")
