"""Which client a request comes from, for the per-address limits (the widget's: serve_app/routes_widget.py): whose
word for the address the ingress takes, and how much of an address is one client.

**Whose word.** Behind HAProxy every request reaches the ingress from HAProxy's own address, so HAProxy sends the
client's in CLIENT_ADDRESS_HEADER, replacing any the client sent (runtime/haproxy_rules.py). But an ingress
replica's own HTTP port can be reached without HAProxy (Serve binds it on `http_options.host`, like HAProxy's
frontend), and a client there could send any address, a fresh one per request, and so get a fresh bucket each time.
So HAProxy also sends a secret of this run in PROXY_SECRET_HEADER (runtime/haproxy.py writes it, 0600, in its
private directory; the replicas read it from there, never from Serve's logged arguments), and the address header is
believed only beside that secret, compared in constant time. Otherwise the peer's address is the client's.

**How much is one client.** An IPv6 host is routinely given a whole /64 (SLAAC and privacy addresses pick any of its
2^64 interface identifiers), so per address one host would be 2^64 clients: an IPv6 address counts by its /64. An
IPv4 address counts alone, and so does an IPv4-mapped IPv6 one (how a dual-stack listener sees an IPv4 client), as
that IPv4 address. HAProxy's own per-address tables count the same way (`ipmask(32,64)`).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # HAProxy's launcher imports this module for the header names, at every HAProxy start
    from starlette.requests import Request

CLIENT_ADDRESS_HEADER = "X-Moderation-Client-Address"
PROXY_SECRET_HEADER = "X-Moderation-Proxy-Secret"
# runtime/haproxy.py writes 64 hex characters; a shorter secret would be a guessable one.
MIN_PROXY_SECRET_CHARS = 32
IPV6_CLIENT_PREFIX = 64


def limit_key_of(address: str) -> str:
    """The part of `address` a per-address limit counts: an IPv4 address whole, an IPv6 one's /64 (`2001:db8::/64`),
    an IPv4-mapped IPv6 one as its IPv4 address; anything that is no IP address (a test client's name) as it is."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network((parsed, IPV6_CLIENT_PREFIX), strict=False))
    return str(parsed)


@dataclass(frozen=True)
class ClientAddresses:
    """`proxy_secret`: the secret HAProxy sends beside the client's address; None (no HAProxy in front, or one
    without our rules): only the peer's address is believed."""

    proxy_secret: str | None = field(default=None, repr=False)  # never in a repr, a log line or a traceback

    def __post_init__(self) -> None:
        if self.proxy_secret is not None and len(self.proxy_secret) < MIN_PROXY_SECRET_CHARS:
            raise ValueError(f"the proxy's secret must have at least {MIN_PROXY_SECRET_CHARS} characters")

    def address(self, headers: Mapping[str, str], peer: str) -> str:
        """The client's address: HAProxy's header when it comes with this run's secret, else the peer's."""
        if self.proxy_secret is None:
            return peer
        sent = headers.get(PROXY_SECRET_HEADER)
        if sent is None or not hmac.compare_digest(sent.encode("utf-8", "replace"), self.proxy_secret.encode()):
            return peer
        return headers.get(CLIENT_ADDRESS_HEADER) or peer

    def limit_key(self, request: Request) -> str:
        """What the per-address limit counts `request` under (`limit_key_of` its client's address)."""
        return limit_key_of(self.address(request.headers, request.client.host if request.client else ""))
