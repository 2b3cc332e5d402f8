"""Time bounds (serve_app/deadlines.py) through a real uvicorn server: TestClient cannot trickle bytes.

Each test asserts the status, a time bound, and that another account is served meanwhile.
The limits are scaled down here (1 s idle, 2.5 s body, 4 s request, 2 bodies at once) to keep the tests fast;
the defaults are 10 s, 30 s, 60 s and 16.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis.asyncio
import uvicorn
from support.api import ADMIN_TOKEN, CONFIG_DIR, Api, StubBackends
from support.raw_http import RawRequest

from store.keys.config import ConfigStore
from runtime.bootstrap import load_plans, load_profiles
from serve_app.app import create_app
from serve_app.deadlines import BODY_SLOT_GRACE_S, TimeLimits
from serve_app.services import Services

IDLE_S, BODY_S, REQUEST_S, CAP = 1.0, 2.5, 4.0, 2
SLACK_S = 1.5  # scheduling on two shared cores
RAY_HEADERS = {"x-request-timeout-seconds": "0", "x-request-disconnect-disabled": "?1"}


class SlowBackends(StubBackends):
    """Text scoring that takes `delay_s` when the text is 'slow'."""

    delay_s: float = 0.0

    async def score_text(self, request):
        if request.text == "slow":
            await asyncio.sleep(self.delay_s)
        return await super().score_text(request)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(redis_url: str):
    backends = SlowBackends()
    limits = TimeLimits(
        body_idle_timeout_s=IDLE_S, body_timeout_s=BODY_S, request_timeout_s=REQUEST_S,
        max_bodies_in_progress_per_account=CAP,
    )
    services = Services.connect(redis_url, backends, inference_timeout_s=30, time_limits=limits)
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        api = Api(client, backends)
        api.keys = seed_with_keys(redis_url, ["attacker", "other"])
        yield api, port
    uv.should_exit = True
    thread.join(timeout=10)


def seed_with_keys(redis_url: str, accounts: list[str]) -> dict[str, dict]:
    """Plans and profiles of config/ and one key per account, straight into the store."""

    async def seed() -> dict[str, dict]:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
        store = ConfigStore(client)
        await store.seed(load_plans(CONFIG_DIR), load_profiles(CONFIG_DIR))
        keys = {}
        for account in accounts:
            _, secret = await store.create_key(account, "default", "default")
            keys[account] = {"Authorization": f"Bearer {secret}"}
        await client.aclose()
        return keys

    return asyncio.run(seed())


def served(api: Api, key: dict) -> float:
    """Another account's plain text request: asserts 200 and returns its latency."""
    started = time.monotonic()
    response = api.moderate_text(key, "hello")
    assert response.status_code == 200, response.text
    return time.monotonic() - started


@pytest.mark.parametrize("extra", [{}, RAY_HEADERS], ids=["plain", "ray-timeout-headers"])
def test_a_stalled_body_is_cut_with_408_while_others_are_served(server, extra):
    api, port = server
    attacker, other = api.keys["attacker"], api.keys["other"]
    stalled = RawRequest(port, attacker, b'{"text": "hello"}', extra)
    stalled.send(b'{"te')  # then nothing
    assert served(api, other) < 1.0
    status, headers, body, elapsed = stalled.response()
    stalled.close()
    assert status == 408 and body["error"]["code"] == "request_timeout", body
    assert IDLE_S - 0.1 <= elapsed < IDLE_S + SLACK_S  # the server's clock starts a hair before ours
    assert served(api, other) < 1.0


@pytest.mark.parametrize("extra", [{}, RAY_HEADERS], ids=["plain", "ray-timeout-headers"])
def test_a_trickled_body_is_cut_at_the_body_deadline(server, extra):
    api, port = server
    attacker, other = api.keys["attacker"], api.keys["other"]
    trickle = RawRequest(port, attacker, b'{"text": "' + b"a" * 100 + b'"}', extra)
    result: list = []
    reader = threading.Thread(target=lambda: result.append(trickle.response()), daemon=True)
    reader.start()
    for byte in trickle.body:  # one byte every half second: never idle, never done
        if not reader.is_alive():
            break
        trickle.send(bytes([byte]))
        # Served long before the trickle's body deadline (BODY_S): a server that waited on the trickle would answer
        # only once it is cut. SLACK_S, not 1 s: one request of about twenty took 1.17 s in a CI-like run.
        assert served(api, other) < SLACK_S
        time.sleep(0.5)
    reader.join(timeout=BODY_S + SLACK_S)
    trickle.close()
    status, _, body, elapsed = result[0]
    assert status == 408 and body["error"]["code"] == "request_timeout", body
    assert BODY_S - 0.1 <= elapsed < BODY_S + SLACK_S


def test_the_body_slot_is_given_back_once_the_body_is_in_so_quick_requests_never_meet_the_cap(server):
    # Twice the cap of one account's requests, each with its body in and its scoring slow: none is refused.
    api, _ = server
    api.backends.delay_s = 1.0
    attacker = api.keys["attacker"]
    with ThreadPoolExecutor(2 * CAP) as pool:
        answers = list(pool.map(lambda _: api.moderate_text(attacker, "slow"), range(2 * CAP)))
    assert [answer.status_code for answer in answers] == [200] * (2 * CAP), [a.text for a in answers]


def test_one_account_receives_at_most_its_cap_of_bodies_at_once(server):
    api, port = server
    attacker, other = api.keys["attacker"], api.keys["other"]
    holding = [RawRequest(port, attacker, b'{"text": "hello"}') for _ in range(CAP)]
    for request in holding:
        request.send(b'{"te')
    time.sleep(0.6)  # both are past authentication and have waited past the grace for their body: each holds a slot
    third = RawRequest(port, attacker, b'{"text": "hello"}')
    third.send(b'{"te')
    status, headers, body, elapsed = third.response()
    third.close()
    assert status == 429 and body["error"]["code"] == "too_many_requests_in_flight", body
    assert int(headers["retry-after"]) >= 1 and elapsed < BODY_SLOT_GRACE_S + 1.0
    assert served(api, attacker) < 1.0  # a body that arrives at once takes no slot, even now
    assert served(api, other) < 1.0  # another account is not affected
    for request in holding:
        assert request.response()[0] == 408
        request.close()
    slow = RawRequest(port, attacker, b'{"text": "hello"}')  # the slots were given back
    slow.send(b'{"te')
    time.sleep(0.5)
    slow.send(b'xt": "hello"}')
    assert slow.response()[0] == 200
    slow.close()


def test_a_request_past_the_server_deadline_is_answered_503_overloaded(server):
    api, _ = server
    api.backends.delay_s = 30
    attacker, other = api.keys["attacker"], api.keys["other"]
    started = time.monotonic()
    slow = api.client.post(
        "/v1/moderate-text", headers={**attacker, **RAY_HEADERS}, json={"text": "slow"}
    )
    elapsed = time.monotonic() - started
    assert slow.status_code == 503, slow.text
    assert slow.json()["error"]["code"] == "overloaded" and int(slow.headers["retry-after"]) >= 1
    assert REQUEST_S - 0.1 <= elapsed < REQUEST_S + SLACK_S
    assert served(api, other) < 1.0
