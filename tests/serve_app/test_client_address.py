"""Which client a request comes from (serve_app/client_address.py): HAProxy's address header is believed only beside
this run's secret, and a per-address limit counts an IPv6 client by its /64, an IPv4 one (mapped or not) alone. The
same rules through the widget's per-address limit, against a real store; through a real HAProxy in
tests/runtime/test_haproxy_rules.py."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers
from support.api import Api, seeded_api

from serve_app.client_address import CLIENT_ADDRESS_HEADER, PROXY_SECRET_HEADER, ClientAddresses, limit_key_of
from serve_app.services import Services
from store.widget import tokens as widget_store

SECRET = "f0" * 32
SITE = "https://comments.example"
PEER = "198.51.100.7"


def _headers(address: str | None = "203.0.113.9", secret: str | None = None) -> Headers:
    sent = {CLIENT_ADDRESS_HEADER: address, PROXY_SECRET_HEADER: secret}
    return Headers({name: value for name, value in sent.items() if value is not None})


def test_without_a_proxy_secret_the_peer_is_the_client_whatever_the_headers_say():
    assert ClientAddresses().address(_headers(secret=SECRET), PEER) == PEER


@pytest.mark.parametrize("sent", [None, "", "e1" * 32, SECRET[:-1], SECRET + "0", SECRET.upper(), "é" * 64])
def test_a_forged_address_without_haproxys_secret_is_ignored(sent):
    assert ClientAddresses(SECRET).address(_headers(secret=sent), PEER) == PEER


def test_beside_haproxys_secret_its_address_is_believed():
    assert ClientAddresses(SECRET).address(_headers(secret=SECRET), PEER) == "203.0.113.9"
    assert ClientAddresses(SECRET).address(_headers(address=None, secret=SECRET), PEER) == PEER


def test_a_short_proxy_secret_is_refused_and_none_is_ever_shown():
    with pytest.raises(ValueError, match="at least 32"):
        ClientAddresses("x" * 31)
    assert SECRET not in repr(ClientAddresses(SECRET))


@pytest.mark.parametrize(
    "address, counted",
    [("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"), ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
     ("2001:DB8:1:3::1", "2001:db8:1:3::/64"), ("fe80::1%eth0", "fe80::/64"), ("::1", "::/64")],
)  # fmt: skip
def test_an_ipv6_address_counts_by_its_64(address, counted):
    assert limit_key_of(address) == counted


@pytest.mark.parametrize("address", ["203.0.113.9", "::ffff:203.0.113.9", "::FFFF:cb00:7109"])
def test_an_ipv4_address_counts_alone_and_an_ipv4_mapped_one_as_that_ipv4_address(address):
    assert limit_key_of(address) == "203.0.113.9"
    assert limit_key_of("::ffff:203.0.113.10") != limit_key_of(address)


def test_a_peer_that_is_no_ip_address_counts_as_it_is():
    assert limit_key_of("testclient") == "testclient" and limit_key_of("") == ""


def _widget_token(api: Api) -> str:
    created = api.client.post("/admin/v1/keys", json={"account": "acme", "profile": "default", "plan": "default"},
                              headers=api.admin).json()  # fmt: skip
    api.client.put(f"/admin/v1/keys/{created['id']}/widget", json={"origins": [SITE]}, headers=api.admin)
    minted = api.client.post("/v1/widget/tokens", json={}, headers={"Authorization": f"Bearer {created['key']}"})
    assert minted.status_code == 200, minted.text
    return minted.json()["token"]


@pytest.fixture
def check_behind_haproxy(redis_url: str, backends, monkeypatch):
    """A widget check through the app as it runs behind HAProxy (its secret known), with one check per address."""
    monkeypatch.setattr(widget_store, "ADDRESS_BURST", 1)
    monkeypatch.setattr(widget_store, "ADDRESS_RATE_PER_S", 0.01)
    services = Services.connect(redis_url, backends, inference_timeout_s=2, client_addresses=ClientAddresses(SECRET))
    with seeded_api(services, backends) as api:
        token = _widget_token(api)

        def check(address: str, secret: str | None = SECRET) -> int:
            headers = {"Authorization": f"Bearer {token}", "Origin": SITE, **_headers(address, secret)}
            return api.client.post("/v1/widget/check-text", json={"text": "hi"}, headers=headers).status_code

        yield check


def test_a_client_forging_addresses_without_the_secret_shares_one_bucket(check_behind_haproxy):
    """As a client that reaches the ingress's own port, bypassing HAProxy, could: all are its peer address."""
    statuses = [check_behind_haproxy(f"203.0.113.{n}", secret=None) for n in range(3)]
    assert statuses + [check_behind_haproxy("203.0.113.9", secret="e1" * 32)] == [200, 429, 429, 429]


def test_behind_haproxy_each_ipv4_client_has_a_bucket_and_an_ipv6_host_one_per_64(check_behind_haproxy):
    checks = ["203.0.113.1", "203.0.113.2", "::ffff:203.0.113.1", "2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:3::1"]
    assert [check_behind_haproxy(address) for address in checks] == [200, 200, 429, 200, 429, 200]
