"""Keys, account isolation, quota, rate limit and failing closed ."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone

import pytest
import redis
from fastapi.testclient import TestClient
from redis.asyncio.connection import AbstractConnection
from support.api import TEST_THRESHOLDS, StubBackends, assert_error

from store import redis_keys
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


@pytest.mark.parametrize("gone", ["plan", "profile"])
def test_a_key_whose_plan_or_profile_is_gone_is_503_and_takes_no_rate_token(api, redis_url, gone):
    api.put_plan("doomed", scope="both", monthly_quota=100, rate_per_second=100, burst=100)
    api.put_profile("doomed", mode="enforce", categories=TEST_THRESHOLDS)
    headers = api.new_key(plan="doomed", profile="doomed")
    with redis.Redis.from_url(redis_url) as store:
        store.delete({"plan": redis_keys.plan, "profile": redis_keys.profile}[gone]("doomed"))
        response = api.moderate_text(headers)
        assert list(store.scan_iter(match=redis_keys.RATE_BUCKET_PREFIX + "*")) == []
    assert_error(response, 503, "store_unavailable")
    assert "(doomed, doomed)" in response.json()["error"]["message"]


def test_a_plan_the_store_reads_but_the_service_cannot_gives_back_what_admission_took(api, redis_url):
    # The admitting script reads the plan's numbers; the service then refuses its record (an unknown scope): 503,
    # and the unit and slot the script took go back.
    api.put_plan("garbled", scope="both", monthly_quota=100, rate_per_second=100, burst=100, max_in_flight=1)
    headers = api.new_key(plan="garbled", account="garbled-co")
    with redis.Redis.from_url(redis_url) as store:
        record = json.loads(store.get(redis_keys.plan("garbled")))
        store.set(redis_keys.plan("garbled"), json.dumps({**record, "scope": "everything"}))
        response = api.client.post("/v1/moderations", headers=headers, json={"input": "hello"})
        assert_error(response, 503, "store_unavailable")
        month = datetime.now(timezone.utc).strftime("%Y-%m")
        assert int(store.get(redis_keys.quota("garbled-co", month)) or 0) == 0
        deadline = time.monotonic() + 5  # the slot goes back in the background
        while store.zcard(redis_keys.work_in_progress("garbled-co")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.zcard(redis_keys.work_in_progress("garbled-co")) == 0


# Commands that run beside a request on the same event loop, so that on a busy machine one may fall inside it: the
# health loop's probe and memory reading, the slot releaser's give-back of an earlier request's slot, and the
# handshake of a connection the pool opens for either of them.
BACKGROUND_COMMANDS = (b"\r\nMEMORY\r\n", b"\r\nZREM\r\n", b"\r\nSETINFO\r\n", b"\r\nHELLO\r\n")


def sent_in_the_background(packed: bytes) -> bool:
    return any(marker in packed for marker in BACKGROUND_COMMANDS) or redis_keys.health_probe("").encode() in packed


def test_authenticating_a_request_is_one_store_round_trip(api, monkeypatch):
    """Key, plan, profile and rate token: one command. A plan without text stops the request right after."""
    api.put_plan("images-only", scope="images", monthly_quota=100, rate_per_second=100, burst=100)
    headers = api.new_key(plan="images-only")
    assert_error(api.moderate_text(headers), 403, "capability_required")  # the first call may load the script
    sent, send = [], AbstractConnection.send_packed_command

    async def recording_send(self, command, check_health=True):
        packed = command if isinstance(command, bytes) else b"".join(command)
        if not sent_in_the_background(packed):
            sent.append(packed)
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording_send)
    assert_error(api.moderate_text(headers), 403, "capability_required")
    assert len(sent) == 1 and b"\r\nEVALSHA\r\n" in sent[0]


def test_a_moderation_request_is_admitted_in_one_store_round_trip_before_its_model_call(api, backends, monkeypatch):
    """Key, plan, profile, rate token, the first quota unit and the work slot: one command, then the model."""
    headers = api.new_key()
    assert api.moderate_text(headers).status_code == 200  # the first call may load the script
    sent, send = [], AbstractConnection.send_packed_command
    sent_before_the_model: list[int] = []

    async def recording_send(self, command, check_health=True):
        packed = command if isinstance(command, bytes) else b"".join(command)
        if not sent_in_the_background(packed):
            sent.append(packed)
        await send(self, command, check_health)

    scored = backends.score_text

    async def noting_score_text(request):
        sent_before_the_model.append(len(sent))
        return await scored(request)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", recording_send)
    monkeypatch.setattr(backends, "score_text", noting_score_text)
    assert api.moderate_text(headers).status_code == 200
    assert sent_before_the_model == [1] and b"\r\nEVALSHA\r\n" in sent[0] and b"\r\nadmit\r\n" in sent[0]


def test_a_request_refused_after_its_admission_gives_back_its_unit_and_slot(api):
    # One unit and one slot in all: a 400 or 403 that kept either would refuse the last request.
    api.put_plan("one-at-a-time", scope="images", monthly_quota=1, rate_per_second=100, burst=100, max_in_flight=1)
    headers = api.new_key(plan="one-at-a-time")
    assert_error(api.client.post("/v1/moderate-text", headers=headers, content=b"{"), 403, "capability_required")
    assert_error(api.moderate(headers, b"garbage"), 400, "invalid_image")
    assert_error(api.moderate(headers, params={"threshold": "x"}), 400, "invalid_threshold")
    openai_text = {"model": "omni-moderation-latest", "input": "hello"}
    assert api.client.post("/v1/moderations", headers=headers, json=openai_text).status_code == 403
    assert api.moderate(headers).status_code == 200


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


def test_the_apps_shutdown_gives_back_the_released_work_slots(redis_url, monkeypatch):
    # Slots of ended requests go back in the background (store/keys/quota.py, QuotaStore.release_slot); a replica
    # that stops must not leave them to their lease, or the account's next requests elsewhere meet slots nobody holds.
    services = Services.connect(redis_url, StubBackends())
    settled = []

    async def recorded() -> None:
        settled.append(True)

    monkeypatch.setattr(services.quota, "settled", recorded)
    with TestClient(create_app(services)):
        assert settled == []
    assert settled == [True]
