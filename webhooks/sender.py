"""One webhook attempt: sign, check where it goes, POST, and say what happened (`store.webhooks.outbox.Attempt`).

Outbound safety (SECURITY.md, Outbound requests): the URL's host is resolved afresh at every attempt and every
address checked (`webhooks.url_guard`), in the lookups' own pool within the account's share (`webhooks.lookups`),
and the request goes to the address that was checked (the URL's host travels as the Host header and, over TLS, as
the SNI name the certificate is verified against), so DNS cannot swap in an internal address between the check and
the connection. Connections are kept per receiver origin (`webhooks.connections`), so one opened and verified for a
host never carries another host's request. A redirect is followed only to the same scheme, host and port (at most
`MAX_REDIRECTS`); anywhere else it is an attempt that failed. Of the answer's body at most `MAX_DRAINED_BYTES` are
read, within `MAX_DRAIN_S`, and thrown away, only so that its connection can carry the next request (a connection
whose answer was not read to its end is closed); the status alone decides. One attempt has `timeout_s` in all.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin

import httpx

from webhooks.connections import ClientsByOrigin
from webhooks.deliveries import DELIVERED, Attempt, Delivery, WebhookRules
from webhooks.lookups import HostLookups, LookupFailed
from webhooks.signing import webhook_headers
from webhooks.url_guard import UnsafeWebhookUrl, WebhookTarget, parse_webhook_url

MAX_REDIRECTS = 3
REDIRECTS = (301, 302, 303, 307, 308)
GONE = 410
USER_AGENT = "moderation-service-webhooks/1"
MAX_ERROR_CHARS = 120  # of a client error's text kept in the log (it may quote the receiver's Location)
# An answer longer or slower than this is not read to its end: its connection is closed instead of kept.
MAX_DRAINED_BYTES = 4096
MAX_DRAIN_S = 1.0
log = logging.getLogger("moderation.webhooks")


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


def _pinned_url(target: WebhookTarget, address: str) -> str:
    host = f"[{address}]" if isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address) else address
    return f"{target.scheme}://{host}:{target.port}{target.path}"


def _host_header(target: WebhookTarget) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = {"http": 80, "https": 443}[target.scheme]
    return host if target.port == default else f"{host}:{target.port}"


class WebhookSender:
    def __init__(self, rules: WebhookRules, *, lookups: HostLookups | None = None,
                 trust: ssl.SSLContext | None = None):  # fmt: skip
        """`trust`: the roots receivers' certificates are verified against (default: certifi's, as httpx's)."""
        self.rules = rules
        self.lookups = lookups or HostLookups()
        self._clients = ClientsByOrigin(trust)

    async def aclose(self) -> None:
        await self._clients.aclose()
        self.lookups.close()

    async def send(self, delivery: Delivery) -> Attempt:
        endpoint = delivery.endpoint
        if endpoint is None:
            return Attempt("endpoint_deleted", final=True)
        if not endpoint.enabled:
            return Attempt("endpoint_disabled", final=True)
        started = time.perf_counter()
        try:
            following = self._follow(endpoint.url, endpoint.secrets, delivery, time.monotonic() + self.rules.timeout_s)
            attempt = await asyncio.wait_for(following, self.rules.timeout_s)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            attempt = Attempt("timeout", error=f"no answer within {self.rules.timeout_s:g} s")
        except httpx.NetworkError as exc:
            attempt = Attempt("connect_error", error=type(exc).__name__)
        except httpx.HTTPError as exc:  # an answer that is not HTTP, or a Location httpx cannot read (`http://[::1`)
            attempt = Attempt("protocol_error", error=f"{type(exc).__name__}: {str(exc)[:MAX_ERROR_CHARS]}")
        except Exception as exc:  # noqa: BLE001 - whatever else a receiver's answer provokes is a failed attempt,
            # recorded and retried on the schedule like any other: never a delivery claimed again forever.
            log.warning("webhook %s: attempt failed with %s", delivery.event_id, type(exc).__name__)
            attempt = Attempt("attempt_error", error=f"the attempt failed ({type(exc).__name__})")
        latency_ms = (time.perf_counter() - started) * 1000
        return Attempt(**{**attempt.__dict__, "latency_ms": latency_ms})

    async def _follow(self, url: str, live_secrets: list[str], delivery: Delivery, deadline: float) -> Attempt:
        first_origin = None
        for _ in range(MAX_REDIRECTS + 1):
            try:
                target = parse_webhook_url(url)
                addresses = await self.lookups.allowed_addresses(delivery.account, target,
                                                                 allow_private=self.rules.allow_private)  # fmt: skip
            except UnsafeWebhookUrl as exc:
                return Attempt("unsafe_url", error=str(exc))
            except LookupFailed as exc:
                return Attempt("dns_error", error=str(exc))
            except OSError:
                return Attempt("dns_error", error="the host does not resolve")
            first_origin = first_origin or target.origin
            if target.origin != first_origin:
                return Attempt("redirect_refused", error="a redirect to another host is not followed")
            status, location, retry_after = await self._post(target, addresses[0], live_secrets, delivery, deadline)
            if status in REDIRECTS and location:
                try:
                    url = urljoin(url, location)
                except ValueError:  # e.g. `//[zz`, an unclosed IPv6 bracket: urljoin parses the URL it makes
                    return Attempt("redirect_refused", status=status, error="a redirect to a malformed URL")
                continue
            return _classified(status, retry_after)
        return Attempt("redirect_refused", error=f"more than {MAX_REDIRECTS} redirects")

    async def _post(
        self, target: WebhookTarget, address: str, live_secrets: list[str], delivery: Delivery, deadline: float
    ) -> tuple[int, str | None, float | None]:
        """POSTs to the checked address; the status, the Location and the Retry-After (seconds)."""
        headers = {
            **webhook_headers(live_secrets, delivery.event_id, int(time.time()), delivery.body),
            "host": _host_header(target), "user-agent": USER_AGENT,
        }  # fmt: skip
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        async with self._clients.client_for(target.origin) as client:
            request = client.build_request(
                "POST", _pinned_url(target, address), headers=headers, content=delivery.body,
                timeout=self.rules.timeout_s, extensions=extensions,
            )  # fmt: skip
            response = await client.send(request, stream=True)
            try:
                # A little short of the attempt's end, so that a slow body never turns an answer into a time-out.
                await _drain(response, min(MAX_DRAIN_S, deadline - time.monotonic() - 0.1))
                return response.status_code, response.headers.get("location"), retry_after_s(
                    response.headers.get("retry-after"), time.time()
                )
            finally:
                await response.aclose()


async def _drain(response: httpx.Response, budget_s: float) -> None:
    """Reads a short answer's body to its end (and drops it), so that its connection is kept; gives up past
    MAX_DRAINED_BYTES or `budget_s`, and the connection is closed."""
    if budget_s <= 0:
        return
    read = 0
    try:
        async with asyncio.timeout(budget_s):
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read > MAX_DRAINED_BYTES:
                    return
    except (TimeoutError, httpx.HTTPError):
        return


def _classified(status: int, retry_after: float | None) -> Attempt:
    if 200 <= status < 300:
        return Attempt(DELIVERED, status=status, final=True)
    if status == GONE:
        return Attempt("gone", status=status, disable_endpoint=True, final=True, error="the receiver answered 410 Gone")
    if status in REDIRECTS:
        return Attempt("http_error", status=status, error="a redirect without a Location")
    return Attempt("http_error", status=status, retry_after_s=retry_after)
