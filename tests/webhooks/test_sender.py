"""One webhook attempt (webhooks/sender.py) against a real receiver on loopback: a DNS name is connected at the
address that was checked, a Retry-After date, more than three redirects, a name that does not resolve, a redirect
to a malformed URL, and any other failure: each ends as an outcome, never an exception."""

from __future__ import annotations

import socket
import time
from email.utils import formatdate

import pytest
from support.webhook_receiver import Answer, WebhookReceiver

from webhooks import sender as sender_module
from webhooks import url_guard
from webhooks.deliveries import Delivery, EndpointForDelivery, WebhookRules
from webhooks.sender import MAX_REDIRECTS, WebhookSender
from webhooks.signing import new_secret

pytestmark = pytest.mark.anyio
RULES = WebhookRules(allow_private=True, timeout_s=3, jitter=0.0)
NAME = "hooks.example"  # resolved only by the test's resolver: the system's has never heard of it


def _delivery(url: str, secret: str) -> Delivery:
    endpoint = EndpointForDelivery(id="whk_1", url=url, enabled=True, secrets=[secret])
    return Delivery(member="msg_1:whk_1", account="acme", event_id="msg_1", event_type="review.created",
                    body=b'{"type": "review.created"}', attempts=0, round_start=0, created_at=time.time(),
                    endpoint=endpoint)  # fmt: skip


@pytest.fixture
def resolver(monkeypatch):
    """The test's DNS: names -> addresses, each lookup counted; a name it lacks does not resolve (gaierror)."""
    answers: dict[str, list[str]] = {}
    lookups: list[str] = []

    def resolve(target: url_guard.WebhookTarget) -> list[str]:
        lookups.append(target.host)
        if target.host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answers[target.host]

    monkeypatch.setattr(url_guard, "resolve", resolve)
    return answers, lookups


async def _send(url: str, receiver: WebhookReceiver, rules: WebhookRules = RULES):
    receiver.secret = new_secret()
    sender = WebhookSender(rules)
    try:
        return await sender.send(_delivery(url, receiver.secret))
    finally:
        await sender.aclose()


async def test_a_dns_name_is_connected_at_the_address_that_was_checked_with_the_name_as_host(resolver):
    answers, lookups = resolver
    with WebhookReceiver() as receiver:
        answers[NAME] = ["127.0.0.1"]
        attempt = await _send(f"http://{NAME}:{receiver.port}/hooks", receiver)
        assert attempt.outcome == "delivered", attempt
        [request] = receiver.received
        # It reached the receiver, which listens on 127.0.0.1 only, under a name no real resolver knows: so the
        # connection went to the address the check saw, and the name travelled as the Host header.
        assert request.headers["host"] == f"{NAME}:{receiver.port}" and request.verified is not None
        assert lookups == [NAME]


async def test_a_name_that_turns_internal_after_creation_is_refused_at_delivery(resolver):
    answers, _ = resolver
    with WebhookReceiver() as receiver:
        answers[NAME] = ["93.184.216.34"]  # public when the endpoint was created
        url_guard.check_webhook_url(f"http://{NAME}:{receiver.port}/hooks", allow_private=False)
        answers[NAME] = ["127.0.0.1"]  # rebound to loopback before the delivery
        attempt = await _send(f"http://{NAME}:{receiver.port}/hooks", receiver, WebhookRules(jitter=0.0))
        assert attempt.outcome == "unsafe_url" and "127.0.0.1" in attempt.error
        assert receiver.received == []


async def test_a_name_that_does_not_resolve_is_a_failed_attempt_to_retry(resolver):
    with WebhookReceiver() as receiver:
        attempt = await _send(f"http://{NAME}:{receiver.port}/hooks", receiver)
        assert (attempt.outcome, attempt.final) == ("dns_error", False)
        assert receiver.received == []


async def test_a_retry_after_given_as_an_http_date_is_read_as_the_seconds_until_then():
    with WebhookReceiver() as receiver:
        receiver.answers.append(Answer(503, {"Retry-After": formatdate(time.time() + 120, usegmt=True)}))
        attempt = await _send(receiver.url, receiver)
        assert attempt.outcome == "http_error" and attempt.status == 503
        assert 115 <= attempt.retry_after_s <= 121


async def test_more_than_three_redirects_are_not_followed():
    with WebhookReceiver() as receiver:
        receiver.answers.extend(Answer(307, {"Location": f"/hop{n}"}) for n in range(MAX_REDIRECTS + 1))
        attempt = await _send(receiver.url, receiver)
        assert attempt.outcome == "redirect_refused" and f"more than {MAX_REDIRECTS}" in attempt.error
        assert [r.path for r in receiver.received] == ["/hooks", "/hop0", "/hop1", "/hop2"]


@pytest.mark.parametrize(
    "location, outcome",
    [("http://[::1", "protocol_error"), ("http://[::1/x", "protocol_error"),  # httpx refuses to read these
     ("//[zz", "redirect_refused"), ("http://a..b/x", "unsafe_url")],  # these reach the sender's own checks
)  # fmt: skip
async def test_a_redirect_to_a_malformed_url_is_a_failed_attempt_not_an_exception(location, outcome):
    with WebhookReceiver() as receiver:
        receiver.answers.append(Answer(302, {"Location": location}))
        attempt = await _send(receiver.url, receiver)
        assert (attempt.outcome, attempt.final) == (outcome, False), attempt


async def test_a_redirect_to_a_host_with_a_bad_label_is_an_unsafe_url():
    with WebhookReceiver() as receiver:
        receiver.answers.append(Answer(302, {"Location": f"http://{'a' * 64}.example/x"}))
        attempt = await _send(receiver.url, receiver)
        assert attempt.outcome == "unsafe_url" and "DNS name" in attempt.error


async def test_any_other_failure_of_an_attempt_is_an_outcome_to_retry(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("something no handler expected")

    monkeypatch.setattr(sender_module, "webhook_headers", broken)
    with WebhookReceiver() as receiver:
        attempt = await _send(receiver.url, receiver)
        assert (attempt.outcome, attempt.final) == ("attempt_error", False)
        assert "RuntimeError" in attempt.error
