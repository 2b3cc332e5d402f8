"""The admin audit log through the admin API: every change and every refused token, never a secret."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient
from support.api import ADMIN_TOKEN, StubBackends, assert_error

from store import redis_keys
from admin.guard import MAX_FAILURES
from admin.app import create_admin_app
from serve_app.services import Services


def _entries(api, **params) -> list[dict]:
    response = api.client.get("/admin/v1/audit", headers=api.admin, params=params)
    assert response.status_code == 200, response.text
    return response.json()["entries"]


def test_changes_and_refused_tokens_are_logged_newest_first_with_who_what_when(api):
    created = api.client.post("/admin/v1/keys", headers=api.admin,
                              json={"account": "acme", "profile": "default", "plan": "default"}).json()
    assert api.client.delete(f"/admin/v1/keys/{created['id']}", headers=api.admin).status_code == 204
    api.client.get("/admin/v1/plans/default", headers=api.admin)  # a read: not logged
    assert_error(api.client.get("/admin/v1/plans/default", headers={"Authorization": "Bearer nope"}), 401,
                 "unauthorized")
    newest = _entries(api, limit=3)
    assert [(e["actor"], e["action"], e["target"], e["status"]) for e in newest] == [
        ("unauthenticated", "GET /admin/v1/plans/{name}", "default", 401),
        ("admin-token", "DELETE /admin/v1/keys/{key_id}", created["id"], 204),
        ("admin-token", "POST /admin/v1/keys", created["id"], 201),
    ]
    assert all(e["source"] == "testclient" and e["at"] > 1.7e9 for e in newest)


def test_the_log_never_holds_the_admin_token_or_a_created_key_secret(api, redis_url):
    created = api.client.post("/admin/v1/keys", headers=api.admin,
                              json={"account": "acme", "profile": "default", "plan": "default"}).json()
    api.client.post("/admin/v1/keys", headers={"Authorization": f"Bearer {created['key']}"},
                    json={"account": "x", "profile": "default", "plan": "default"})  # a key as admin token: 401
    api.client.put("/admin/v1/plans/p", headers={"Authorization": f"Bearer {ADMIN_TOKEN}x"}, json={})
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        raw = repr(client.xrange(redis_keys.admin_audit()))
    assert created["id"] in raw and "401" in raw
    for secret in (created["key"], ADMIN_TOKEN, created["key"][-20:], ADMIN_TOKEN[-20:]):
        assert secret not in raw
    listed = api.client.get("/admin/v1/audit", headers=api.admin).text
    assert created["key"] not in listed and ADMIN_TOKEN not in listed


def test_pages_follow_the_cursor_and_a_bad_cursor_is_a_400(api):
    for n in range(5):
        api.put_plan(f"p{n}", scope="text", monthly_quota=1, rate_per_second=1, burst=1)
    first = api.client.get("/admin/v1/audit", headers=api.admin, params={"limit": 2}).json()
    second = api.client.get("/admin/v1/audit", headers=api.admin,
                            params={"limit": 2, "before": first["next_before"]}).json()
    assert [e["target"] for e in first["entries"] + second["entries"]][:4] == ["p4", "p3", "p2", "p1"]
    for params in ({"before": "0-0) + *"}, {"limit": 0}, {"limit": 100_000}):
        assert_error(api.client.get("/admin/v1/audit", headers=api.admin, params=params), 400, "invalid_request")


def test_a_throttled_guesser_cannot_flood_the_log(redis_url):
    services = Services.connect(redis_url, StubBackends())
    with TestClient(create_admin_app(services, ADMIN_TOKEN)) as client:
        for _ in range(MAX_FAILURES * 5):
            client.get("/admin/v1/plans/default", headers={"Authorization": "Bearer guess"})
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.xlen(redis_keys.admin_audit()) == MAX_FAILURES


def test_calls_that_never_passed_the_token_check_write_nothing_as_the_admin(api, redis_url):
    with redis.Redis.from_url(redis_url) as raw:
        before = raw.xlen(redis_keys.admin_audit())  # the fixture's seeding
    for send in (lambda: api.client.post("/admin/v1/nowhere", json={}),
                 lambda: api.client.post("/admin/v1/plans/default", json={}),  # a wrong method: 405
                 lambda: api.client.delete("/admin/v1/nowhere", headers=api.admin)):
        assert send().status_code in (404, 405)
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.xlen(redis_keys.admin_audit()) == before
