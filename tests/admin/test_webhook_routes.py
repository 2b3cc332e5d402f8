"""The admin API's webhook routes: endpoints per account, secrets shown once, the URL rule, rotation, the delivery
log and redelivery, against a real store."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio
from fastapi.testclient import TestClient
from support.api import ADMIN_TOKEN, assert_error

from store.webhooks.outbox import Outbox
from webhooks.deliveries import Attempt
from store.review.queue import ReviewQueue
from webhooks.deliveries import WebhookRules
from admin.app import create_admin_app
from serve_app.services import Services

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _admin(redis_url: str, allow_private: bool) -> TestClient:
    services = Services.connect(redis_url, backends=None, webhook_rules=WebhookRules(allow_private=allow_private))
    return TestClient(create_admin_app(services, ADMIN_TOKEN), headers=AUTH)


def test_an_endpoint_is_created_listed_changed_and_deleted_and_its_secret_shown_once(redis_url):
    with _admin(redis_url, allow_private=True) as admin:
        created = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/hook"})
        assert created.status_code == 201, created.text
        endpoint = created.json()
        assert endpoint["secret"].startswith("whsec_") and endpoint["enabled"] is True
        assert endpoint["events"] == ["review.created", "review.decided", "report.escalated"]
        listed = admin.get("/admin/v1/accounts/acme/webhooks").json()["endpoints"]
        assert [e["id"] for e in listed] == [endpoint["id"]] and "secret" not in listed[0]
        assert "secret" not in admin.get(f"/admin/v1/webhooks/{endpoint['id']}").json()
        changed = admin.patch(f"/admin/v1/webhooks/{endpoint['id']}", json={"events": ["review.decided"],
                                                                            "enabled": False})  # fmt: skip
        assert changed.json()["events"] == ["review.decided"] and changed.json()["enabled"] is False
        rotated = admin.post(f"/admin/v1/webhooks/{endpoint['id']}/rotate-secret").json()
        assert rotated["secret"].startswith("whsec_") and rotated["secret"] != endpoint["secret"]
        assert admin.delete(f"/admin/v1/webhooks/{endpoint['id']}").status_code == 204
        assert_error(admin.get(f"/admin/v1/webhooks/{endpoint['id']}"), 404, "not_found")
        assert admin.get("/admin/v1/accounts/acme/webhooks").json()["endpoints"] == []


@pytest.mark.parametrize(
    "body",
    [{"url": "ftp://example.com/x"}, {"url": "http://127.0.0.1:9/hook"}, {"url": "http://169.254.169.254/latest"},
     {"url": "http://[::1]/x"}, {"url": "http://localhost/x"}, {"url": "http://u:p@example.com/"},
     {"url": "http://example.com/", "events": []}, {"url": "http://example.com/", "events": ["review.deleted"]},
     {"url": "http://example.com/", "extra": 1}, {"url": "x" * 3000}],
)  # fmt: skip
def test_unsafe_urls_and_bad_bodies_are_a_400_and_nothing_is_created(redis_url, body):
    with _admin(redis_url, allow_private=False) as admin:
        assert_error(admin.post("/admin/v1/accounts/acme/webhooks", json=body), 400, "invalid_request")
        assert admin.get("/admin/v1/accounts/acme/webhooks").json()["endpoints"] == []


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://[::1/x", f"http://{'a' * 64}.example.com/", "http://a..b/", "https://-x.example/",
            f"http://{'abc.' * 64}example/"],
)  # fmt: skip
def test_a_malformed_url_is_a_400_on_create_and_on_change_never_a_500(redis_url, url):
    with _admin(redis_url, allow_private=True) as admin:
        assert_error(admin.post("/admin/v1/accounts/acme/webhooks", json={"url": url}), 400, "invalid_request")
        endpoint = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/"}).json()
        assert_error(admin.patch(f"/admin/v1/webhooks/{endpoint['id']}", json={"url": url}), 400, "invalid_request")
        assert admin.get(f"/admin/v1/webhooks/{endpoint['id']}").json()["url"] == "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    "url", ["http://[2002:a00:5::]/x", "http://[2002:7f00:1::]/x", "https://[2002:c0a8:101::]/x",  # 6to4
            "http://[64:ff9b::a00:5]/x", "http://[::a00:5]/x", "http://[2001:0:5db8:d822::f5ff:fffe]/x"],
)  # fmt: skip
def test_a_url_whose_ipv6_address_carries_an_internal_ipv4_address_is_a_400_on_create_and_on_change(redis_url, url):
    # 10.0.0.5, 127.0.0.1 and 192.168.1.1 behind 6to4, NAT64, IPv4-compatible and Teredo: the 6to4 ones were a 201.
    with _admin(redis_url, allow_private=False) as admin:
        assert_error(admin.post("/admin/v1/accounts/acme/webhooks", json={"url": url}), 400, "invalid_request")
        assert admin.get("/admin/v1/accounts/acme/webhooks").json()["endpoints"] == []
        endpoint = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://[2002:5db8:d822::]/"}).json()
        assert_error(admin.patch(f"/admin/v1/webhooks/{endpoint['id']}", json={"url": url}), 400, "invalid_request")


def test_an_account_has_at_most_ten_endpoints(redis_url):
    with _admin(redis_url, allow_private=True) as admin:
        for _ in range(10):
            created = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/"})
            assert created.status_code == 201
        assert_error(admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/"}), 400,
                     "invalid_request")  # fmt: skip


def test_unknown_ids_are_404_and_malformed_ones_400(redis_url):
    with _admin(redis_url, allow_private=True) as admin:
        missing = "whk_" + "0" * 24
        assert_error(admin.get(f"/admin/v1/webhooks/{missing}"), 404, "not_found")
        assert_error(admin.patch(f"/admin/v1/webhooks/{missing}", json={"enabled": True}), 404, "not_found")
        assert_error(admin.get(f"/admin/v1/webhooks/{missing}/deliveries"), 404, "not_found")
        assert_error(admin.get("/admin/v1/webhooks/whk_nothex"), 400, "invalid_request")
        assert_error(admin.post(f"/admin/v1/webhooks/{missing}/deliveries/msg_{'0' * 24}_1/redeliver"), 404,
                     "not_found")  # fmt: skip


def test_the_delivery_log_and_a_redelivery(redis_url):
    with _admin(redis_url, allow_private=True) as admin:
        endpoint = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/"}).json()

        async def one_failed_attempt() -> str:
            client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
            await ReviewQueue(client).create(account="acme", reason="model_flagged", kind="text", reference="r",
                                             image_url=None, scores={"toxic": 0.9}, model_version="v")  # fmt: skip
            outbox = Outbox(client, WebhookRules(retry_schedule_s=(0,)))
            [delivery] = await outbox.claim(5)
            await outbox.record(delivery, Attempt("connect_error", latency_ms=3.2, error="ConnectError"))
            await client.aclose()
            return delivery.event_id

        event_id = asyncio.run(one_failed_attempt())
        log = admin.get(f"/admin/v1/webhooks/{endpoint['id']}/deliveries").json()
        assert [(a["event_id"], a["outcome"], a["attempt"]) for a in log["attempts"]] == [
            (event_id, "connect_error", 1)]
        again = admin.post(f"/admin/v1/webhooks/{endpoint['id']}/deliveries/{event_id}/redeliver")
        assert again.status_code == 202 and again.json()["status"] == "pending"


def test_the_audit_log_names_each_endpoint_changed_and_never_its_secret(redis_url):
    with _admin(redis_url, allow_private=True) as admin:
        created = admin.post("/admin/v1/accounts/acme/webhooks", json={"url": "http://127.0.0.1:9/hook"}).json()
        admin.post(f"/admin/v1/webhooks/{created['id']}/rotate-secret")
        entries = admin.get("/admin/v1/audit?limit=2").json()["entries"]
        assert [(e["action"], e["target"]) for e in entries] == [
            ("POST /admin/v1/webhooks/{endpoint_id}/rotate-secret", created["id"]),
            ("POST /admin/v1/accounts/{account}/webhooks", created["id"]),
        ]
        assert created["secret"] not in str(entries)
