"""The rules of a widget token: which page origins a key may allow, and how long and how often a token may be used.

A widget token is what a site's backend asks the service for (POST /v1/widget/tokens, with its server key) and puts
in its page: a short-lived, check-only stand-in for the key, bound to the origins the operator allows for the key.
Pure code: the store keeps the tokens (store/widget/tokens.py), the public app serves them (serve_app/routes_widget.py).
"""

from __future__ import annotations

from urllib.parse import urlsplit

# A token lives for minutes: a page is open for a while, and a token copied out of it soon expires.
DEFAULT_TOKEN_MINUTES = 30
MAX_TOKEN_MINUTES = 24 * 60
# Checks one token may make: a person checks a comment a few times while writing it; the page asks for a new token
# once these are spent. Each check also counts against the key's plan (quota and rate) like any other moderation.
DEFAULT_TOKEN_USES = 20
MAX_TOKEN_USES = 1_000
# The most origins one key may allow, and the longest origin: an operator lists a site's few origins, not a crawl.
MAX_ORIGINS_PER_KEY = 50
MAX_ORIGIN_CHARS = 253 + len("https://") + len(":65535")
# Checks from one client address through one key: a token bucket (rate per second, burst). A person checks a comment
# a few times a minute; a script looping on a page's token is held here before it spends the key's plan.
ADDRESS_RATE_PER_S = 0.5
ADDRESS_BURST = 10


class InvalidOrigin(ValueError):
    pass


def normal_origin(raw: str) -> str:
    """`scheme://host[:port]`, lower case, without a default port: the form a browser sends in `Origin`.
    InvalidOrigin for anything else (a path, a query, credentials, a scheme other than http or https)."""
    text = raw.strip()
    if not text or len(text) > MAX_ORIGIN_CHARS:
        raise InvalidOrigin(f"An origin is 1 to {MAX_ORIGIN_CHARS} characters: {raw[:80]!r}.")
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        raise InvalidOrigin(f"The port of {raw!r} is not a number from 0 to 65535.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidOrigin(f"An origin is http:// or https:// and a host: {raw!r}.")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise InvalidOrigin(f"An origin has no path, query, fragment or user: {raw!r}.")
    default_port = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    suffix = f":{port}" if port is not None and port != default_port else ""
    return f"{parts.scheme}://{host}{suffix}"


def normal_origins(raw: list[str]) -> list[str]:
    """An operator's list, each origin in its normal form, without repeats, in the order given."""
    origins = list(dict.fromkeys(normal_origin(origin) for origin in raw))
    if len(origins) > MAX_ORIGINS_PER_KEY:
        raise InvalidOrigin(f"A key allows at most {MAX_ORIGINS_PER_KEY} origins; {len(origins)} given.")
    return origins
