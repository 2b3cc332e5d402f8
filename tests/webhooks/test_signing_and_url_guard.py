"""Webhook signatures as a receiver checks them (the `standardwebhooks` package), and the outbound URL rule, IPv6
addresses that carry an IPv4 one included (as literals and as DNS answers)."""

from __future__ import annotations

import json
import re
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from webhooks import url_guard
from webhooks.signing import SECRET_PREFIX, new_secret, webhook_headers
from webhooks.url_guard import UnsafeWebhookUrl, check_webhook_url, is_public_address, parse_webhook_url

BODY = json.dumps({"type": "review.decided", "data": {"id": 7}}).encode()


def test_the_reference_verifier_accepts_our_signature_and_refuses_a_changed_body_or_another_secret():
    secret = new_secret()
    assert secret.startswith(SECRET_PREFIX)
    headers = webhook_headers([secret], "msg_1", int(time.time()), BODY)
    assert Webhook(secret).verify(BODY, headers) == {"type": "review.decided", "data": {"id": 7}}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY.replace(b"7", b"8"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)


def test_during_a_rotation_each_live_secret_verifies_on_its_own():
    new, old = new_secret(), new_secret()
    headers = webhook_headers([new, old], "msg_2", int(time.time()), BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(BODY, headers) and Webhook(old).verify(BODY, headers)


def test_a_stale_timestamp_is_refused_by_the_receiver():
    secret = new_secret()
    headers = webhook_headers([secret], "msg_3", 1_000_000_000, BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/x", "file:///etc/passwd", "gopher://example.com", "http://user:pw@example.com/",
     "http:///nohost", "http://example.com:99999/", "https://exa mple.com/", "javascript:alert(1)"],
)  # fmt: skip
def test_only_plain_http_and_https_urls_with_a_host_are_taken(url):
    with pytest.raises(UnsafeWebhookUrl):
        parse_webhook_url(url)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1",
     "fe80::1", "fc00::1", "::ffff:127.0.0.1", "224.0.0.1", "240.0.0.1"],
)  # fmt: skip
def test_loopback_private_link_local_and_reserved_addresses_are_not_public(address):
    assert not is_public_address(address)


def test_public_addresses_are_public():
    assert is_public_address("93.184.216.34") and is_public_address("2606:4700::1111")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://localhost/hook", "http://169.254.169.254/",
                                 "http://[::1]:9/x", "http://10.0.0.5/"])  # fmt: skip
def test_internal_receivers_are_refused_unless_the_operator_allows_them(url):
    with pytest.raises(UnsafeWebhookUrl, match="MODERATION_WEBHOOK_ALLOW_PRIVATE"):
        check_webhook_url(url, allow_private=False)
    assert check_webhook_url(url, allow_private=True).path.startswith("/")


def test_a_host_that_does_not_resolve_is_refused():
    with pytest.raises(UnsafeWebhookUrl, match="does not resolve"):
        check_webhook_url("https://no-such-host.invalid/hook", allow_private=True)


# IPv6 addresses that carry an internal IPv4 address, each form as a translator, a relay or the host would reach it.
CARRYING_INTERNAL = {
    "IPv4-mapped ::ffff:10.0.0.5": "::ffff:a00:5",
    "IPv4-compatible ::10.0.0.5": "::a00:5",
    "NAT64 64:ff9b::10.0.0.5": "64:ff9b::a00:5",
    "NAT64 64:ff9b::127.0.0.1": "64:ff9b::7f00:1",
    "local-use NAT64 64:ff9b:1::/48": "64:ff9b:1::5db8:d822",  # never public, whatever it carries
    "6to4 of 10.0.0.5": "2002:a00:5::",
    "6to4 of 127.0.0.1": "2002:7f00:1::1",
    "6to4 of 192.168.1.1": "2002:c0a8:101::",
    "6to4 of 169.254.169.254": "2002:a9fe:a9fe::",
    "Teredo, server 10.0.0.5": "2001:0:a00:5::a247:27dd",  # its client 93.184.216.34, stored inverted
    "Teredo, client 10.0.0.1": "2001:0:5db8:d822::f5ff:fffe",  # server 93.184.216.34; client inverted
}


@pytest.mark.parametrize("address", CARRYING_INTERNAL.values(), ids=CARRYING_INTERNAL.keys())
def test_an_ipv6_address_that_carries_an_internal_ipv4_address_is_not_public(address):
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["64:ff9b::5db8:d822", "::ffff:5db8:d822", "2002:5db8:d822::1"])
def test_nat64_mapped_and_6to4_addresses_of_a_public_ipv4_address_are_public(address):
    # 93.184.216.34 inside: an IPv6-only cluster behind DNS64 must still reach an IPv4-only receiver.
    assert is_public_address(address)


@pytest.mark.parametrize("address", CARRYING_INTERNAL.values(), ids=CARRYING_INTERNAL.keys())
def test_a_url_whose_literal_carries_an_internal_ipv4_address_is_refused(address):
    with pytest.raises(UnsafeWebhookUrl, match="MODERATION_WEBHOOK_ALLOW_PRIVATE"):
        check_webhook_url(f"https://[{address}]/hook", allow_private=False)


@pytest.mark.parametrize("address", CARRYING_INTERNAL.values(), ids=CARRYING_INTERNAL.keys())
def test_a_name_that_resolves_to_an_address_carrying_an_internal_ipv4_address_is_refused(address, monkeypatch):
    monkeypatch.setattr(url_guard, "resolve", lambda target: ["93.184.216.34", address])
    with pytest.raises(UnsafeWebhookUrl, match=re.escape(address)):
        check_webhook_url("https://hooks.example/hook", allow_private=False)
    target = parse_webhook_url("https://hooks.example/hook")
    with pytest.raises(UnsafeWebhookUrl):
        url_guard.allowed_addresses(target, allow_private=False)  # the worker's check at every attempt
