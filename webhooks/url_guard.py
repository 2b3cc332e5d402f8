"""Which webhook URLs the service may call: the outbound rule that keeps a tenant from reaching the service's insides.

A webhook URL is chosen by whoever manages an account's endpoints, and the delivery worker calls it from inside the
operator's network. So: `http` or `https` only, no user name or password in it, and every address its host resolves
to must be a public one: loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, where cloud metadata
services answer, and fe80::/10), carrier-grade NAT, multicast, reserved and unspecified addresses are refused, unless
the operator sets MODERATION_WEBHOOK_ALLOW_PRIVATE (for a receiver on the same machine or network, and the tests).
An IPv6 address that carries an IPv4 one (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) reaches that IPv4
address through the host, a translator or a relay, so the IPv4 address inside is held to the same rule: `ipaddress`
calls 6to4's `2002:a00:5::` global, and on a cluster with a 6to4 relay or NAT64 it reaches 10.0.0.5.

The rule is applied twice: when an endpoint is created or changed (a clear 400), and at every delivery, after a fresh
DNS lookup, by the worker, which then connects to the very address it checked (webhooks/sender.py), so a name
that resolves to a public address at creation and to 127.0.0.1 later (DNS rebinding) is still refused.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_CHARS = 2048
MAX_HOST_CHARS = 253  # a DNS name's limit (RFC 1035)
# One label of a DNS name: 1 to 63 letters, digits, '-' (and '_', which some real names carry), as the resolver wants.
HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
SCHEMES = {"http": 80, "https": 443}


class UnsafeWebhookUrl(ValueError):
    """A URL the worker must not call; the message says why (no secret in it)."""


@dataclass(frozen=True)
class WebhookTarget:
    scheme: str
    host: str  # as written in the URL, lowercased; IPv6 without brackets
    port: int
    path: str  # path and query, at least "/"

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def parse_webhook_url(url: str) -> WebhookTarget:
    """The URL's parts; raises UnsafeWebhookUrl for anything but a plain http(s) URL with a host."""
    if len(url) > MAX_URL_CHARS:
        raise UnsafeWebhookUrl(f"A webhook URL is at most {MAX_URL_CHARS} characters.")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise UnsafeWebhookUrl("A webhook URL must not contain spaces or control characters.")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise UnsafeWebhookUrl("The webhook URL is malformed.") from exc
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UnsafeWebhookUrl("A webhook URL must start with http:// or https://.")
    if parts.username is not None or parts.password is not None:
        raise UnsafeWebhookUrl("A webhook URL must not carry a user name or password; sign with the secret instead.")
    try:
        port = parts.port or SCHEMES[scheme]
    except ValueError as exc:
        raise UnsafeWebhookUrl("The webhook URL's port is not a number from 1 to 65535.") from exc
    host = (parts.hostname or "").lower()
    if not host:
        raise UnsafeWebhookUrl("A webhook URL needs a host.")
    _check_host_syntax(host)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return WebhookTarget(scheme=scheme, host=host, port=port, path=path)


def _check_host_syntax(host: str) -> None:
    """An IP address, or a DNS name the resolver can encode: labels of 1 to 63 characters (after IDNA), at most
    253 in all. Anything else would fail in the resolver with an error of its own, not as a refused URL."""
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    try:
        ascii_name = host.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise UnsafeWebhookUrl(
            "The webhook URL's host is not a valid DNS name (an empty label, or one too long)."
        ) from exc
    labels = ascii_name.removesuffix(".").split(".")
    if len(ascii_name) > MAX_HOST_CHARS or not all(HOST_LABEL.fullmatch(label) for label in labels):
        raise UnsafeWebhookUrl("The webhook URL's host is not a valid DNS name (letters, digits, '-' and '.').")


CARRIER_GRADE_NAT = ipaddress.ip_network("100.64.0.0/10")  # not global, yet not is_private
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated (RFC 4291); ::1 and :: are in it too
NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the IPv4 address is the last 32 bits
# RFC 8215's local-use NAT64 prefix: never globally reachable, and where the IPv4 address sits inside it depends on
# the prefix length the operator chose (RFC 6052: /32 to /96), so no one position can be decoded: always refused.
NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")


def _passes_the_rule(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if ip in CARRIER_GRADE_NAT:
        return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def carried_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which the connection may end up reaching: IPv4-mapped
    (::ffff:0:0/96, the host's own stack), IPv4-compatible (::/96), NAT64 (64:ff9b::/96), 6to4 (2002::/16, a relay)
    and Teredo (2001::/32: its server and its client, stored inverted); none for any other address."""
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip in IPV4_COMPATIBLE or ip in NAT64_WELL_KNOWN:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)
    return []


def is_public_address(address: str) -> bool:
    """Whether the webhook rule lets the worker connect to this address: it, and every IPv4 address it carries, must
    be public. An IPv4-mapped or NAT64 address is nothing but its IPv4 address, which decides alone (so an IPv6-only
    cluster behind DNS64 still reaches public IPv4 receivers); the other forms must pass as IPv6 addresses too."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address):
        return _passes_the_rule(ip)
    if ip in NAT64_LOCAL_USE:
        return False
    carried = carried_ipv4(ip)
    if not all(_passes_the_rule(inner) for inner in carried):
        return False
    if ip.ipv4_mapped is not None or ip in NAT64_WELL_KNOWN:
        return True
    return _passes_the_rule(ip)


def resolve(target: WebhookTarget) -> list[str]:
    """Every address the host resolves to (an IP literal resolves to itself); raises OSError when none."""
    infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


def allowed_addresses(target: WebhookTarget, *, allow_private: bool) -> list[str]:
    """The addresses the worker may connect to; raises UnsafeWebhookUrl when any is not public (and private ones
    are not allowed), OSError when the name does not resolve."""
    addresses = resolve(target)
    if not allow_private:
        refused = [address for address in addresses if not is_public_address(address)]
        if refused:
            raise UnsafeWebhookUrl(
                f"The webhook host {target.host!r} resolves to a loopback, private, link-local or reserved address, "
                f"or one that carries such an IPv4 address ({refused[0]}); the operator has not allowed those "
                f"(MODERATION_WEBHOOK_ALLOW_PRIVATE)."
            )
    return addresses


def check_webhook_url(url: str, *, allow_private: bool) -> WebhookTarget:
    """What the admin API checks when an endpoint is created or changed. A name that does not resolve now is
    refused too: an endpoint nobody can reach would only fill the delivery log."""
    target = parse_webhook_url(url)
    try:
        allowed_addresses(target, allow_private=allow_private)
    except OSError as exc:
        raise UnsafeWebhookUrl(f"The webhook host {target.host!r} does not resolve.") from exc
    return target
