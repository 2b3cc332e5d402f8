"""Our rules in Ray's HAProxy config: per-address limits, and HAProxy's own answers in the documented error shape.

**Per-address limits.** The per-account limits (rate, `max_in_flight`, the model gates) need a key, so a flood without
one (`/healthz`, a 404) or with made-up keys (each a 401 after a store round trip) was bounded only by what the
ingress replica's event loop could answer, and on a 2-core machine 400 `/healthz` calls from 16 callers delayed
another account's text by 6 s. HAProxy counts, per client (an IPv4 address, or an IPv6 address's /64: one host
holds a whole /64; serve_app/client_address.py counts the widget's clients the same way), over a sliding 10 s:

- requests that are not keyed: keyed is a well-formed API key (`Bearer mod_` and 43 URL-safe characters, or the
  same in `?key=`; a widget token `Bearer wt_` and 43 counts as one) sent to a route that checks it
  (`KEYED_ROUTES`). Past `unkeyed` of them, that client's unkeyed requests are answered 429 `rate_limited` by
  HAProxy itself, with Retry-After. Any other `Authorization` header counts as none (a `/healthz` flood with
  `Authorization: x` is unkeyed), and a well-formed key sent anywhere else counts as none too: on a path or method
  no route has, or one that needs no key, the app answers 404, 405 or 200 without ever checking it, so no 401
  would ever count a flood of made-up keys there;
- answers of 401 (a wrong or revoked key): past `refused_keys` of them, every request from that client is
  answered 429 the same way until the rate falls back.

Refused requests count too, so an address that keeps flooding stays refused, and one that waits Retry-After is
served again. Keyed requests of an address with few 401s are never counted: a busy site's backend, one address
sending all its users' content, meets only its plan's limits.

**The client's address.** HAProxy tells the ingress the client's address in CLIENT_ADDRESS_HEADER, with this run's
secret in PROXY_SECRET_HEADER (runtime/haproxy.py writes it; the launcher reads it from its 0600 file, never from
its command line), each replacing any a client sent; the ingress believes the address only beside the secret
(serve_app/client_address.py), so a client that reaches an ingress replica's own port cannot choose its address.

**Error answers.** Left to Ray's template, what HAProxy says itself (no ingress replica up, one that failed
mid-request, a timeout) is a plain-text 500, which tells a client its request is wrong for good, and a full
ingress replica's own refusal (Serve's back-pressure) is a plain-text 503. Both become the documented JSON body
with Retry-After: 503 `ingress_unavailable` and 503 `overloaded`. A non-JSON 500 (an error Serve caught before our
app) becomes 500 `internal_error`. Every answer gets an X-Request-ID, HAProxy's own included.

Ray 2.60's template (ray/serve/_private/haproxy_templates.py) has no place for such rules, and Ray writes the
config again before every HAProxy start and reload. So Ray is pointed at a launcher (`launcher_script`) instead of
the binary: it adds these rules to the config Ray wrote, then execs the verified binary with Ray's arguments
unchanged (same process, same command line, so Ray's reloads and `-sf` keep working).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from serve_app.client_address import CLIENT_ADDRESS_HEADER, PROXY_SECRET_HEADER

WINDOW_S = 10
# Behind HAProxy every request reaches the ingress from HAProxy's address; the widget's per-address limit needs the
# client's. HAProxy sets this header to the address it was connected from, replacing any the client sent.
CLIENT_ADDRESS_RULE = f"http-request set-header {CLIENT_ADDRESS_HEADER} %[src]"
# What the stick table counts a client by: an IPv4 address whole (an IPv4-mapped IPv6 one too, as its IPv4 address:
# checked against the bundled binary), an IPv6 address by its /64.
CLIENT_KEY = "src,ipmask(32,64)"
# The secret HAProxy proves itself with: 64 hex characters (runtime/haproxy.py); anything else in the file would be
# written into HAProxy's config, so it is refused.
PROXY_SECRET_PATTERN = re.compile(r"[0-9a-f]{64}")
MARKER = "# moderation-service: our rules (runtime/haproxy_rules.py)"
ERROR_FILE = "moderation-503.http"
FRONTEND = "frontend http_frontend"
RETRY_AFTER_S = WINDOW_S


# A well-formed API key: `mod_` and 43 URL-safe base64 characters (store/keys/config.py, SECRET_PREFIX and
# token_urlsafe(32)); as a Bearer token, a well-formed widget token counts too (`wt_` and 43, store/widget/tokens.py
# TOKEN_PREFIX), since it is a credential the store checks like a key: a site's visitors behind one address
# checking comments meet the widget's own per-address limit, not the keyless one, and made-up tokens are 401s,
# which the refused-keys count holds. HAProxy's regex may be POSIX or PCRE, so no `\s` and no flags: the scheme is
# spelled both cases.
KEY_PATTERN = "^mod_[A-Za-z0-9_-]{43}$"
BEARER_KEY_PATTERN = "^[Bb][Ee][Aa][Rr][Ee][Rr][[:blank:]]+(mod|wt)_[A-Za-z0-9_-]{43}[[:blank:]]*$"


# The public app's routes that check a key or a widget token, by method (serve_app/routes_*.py; a test holds this to
# the app's routes). `{name}` is a path segment. Everything else (the health check, the docs, the widget's script
# and preflights, any path or method no route has) answers without checking a key.
KEYED_ROUTES = {
    "POST": (
        "/v1/moderate", "/v1/moderate-text", "/v1/report", "/v1/feedback", "/v1/moderations",
        "/v1alpha1/comments:analyze", "/v1alpha1/comments:suggestscore", "/comments:analyze", "/comments:suggestscore",
        "/v1/widget/tokens", "/v1/widget/check-text", "/v1/widget/check-image", "/v1/widget/verdicts/redeem",
    ),
    "GET": ("/v1/review/{item_id}",),
}


@dataclass(frozen=True)
class SourceLimits:
    """Per client address and sliding 10 s window. 0 turns a limit off."""

    unkeyed: int = 100
    refused_keys: int = 50


def _body(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})


def _refusal(message: str) -> str:
    return (f"http-request return status 429 content-type application/json hdr Retry-After {RETRY_AFTER_S} "
            f"string '{_body('rate_limited', message)}'")  # fmt: skip


# HAProxy's own errors (Ray's template points 502, 503 and 504 at one plain-text 500): all mean that no ingress
# replica answered, which a retry fixes once Serve has one up again.
OWN_ERRORS = (502, 503, 504)
UNAVAILABLE = _body("ingress_unavailable", "No ingress replica could answer; retry shortly.")
# A backend answer that is not our JSON: Serve's own, from around our app.
NOT_OURS = "!{ res.hdr(content-type) -m beg application/json }"
BACKEND_ANSWERS = [
    "http-response return status 503 content-type application/json hdr Retry-After 1 "
    f"string '{_body('overloaded', 'The ingress replica is at capacity; retry shortly.')}' if {{ status 503 }} {NOT_OURS}",
    "http-response return status 500 content-type application/json "
    f"string '{_body('internal_error', 'Internal error.')}' if {{ status 500 }} {NOT_OURS}",
    # Last: on every answer, HAProxy's own and the returns above included.
    "http-after-response set-header X-Request-ID %[uuid] if !{ res.hdr(x-request-id) -m found }",
]


def error_file(body: str) -> str:
    """HAProxy's errorfile format: a whole HTTP response, sent as is."""
    return (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
        f"Cache-Control: no-cache\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    )


def frontend_rules(limits: SourceLimits, proxy_secret: str) -> list[str]:
    """The lines that go right after the frontend's `bind`, ahead of Ray's own rules."""
    if not PROXY_SECRET_PATTERN.fullmatch(proxy_secret):
        raise ValueError("the proxy's secret is not 64 hex characters")
    proxy_secret_rule = f"http-request set-header {PROXY_SECRET_HEADER} {proxy_secret}"
    return [MARKER, *_limit_rules(limits), *BACKEND_ANSWERS, CLIENT_ADDRESS_RULE, proxy_secret_rule]


def _keyed_route_acls() -> tuple[list[str], str]:
    """An ACL of the keyed routes' paths per method, and the condition: a well-formed key sent to one of them."""
    acls, keyed = [], []
    for method, routes in KEYED_ROUTES.items():
        name = f"mod_keyed_route_{method.lower()}"
        fixed = [route for route in routes if "{" not in route]
        templated = [re.sub(r"\{[a-z_]+\}", "[^/]+", route) for route in routes if "{" in route]
        acls += [f"acl {name} path {' '.join(fixed)}"] if fixed else []
        acls += [f"acl {name} path_reg ^{pattern}$" for pattern in templated]
        keyed.append(f"mod_key {{ method {method} }} {name}")
    return acls, " || ".join(keyed)


def _limit_rules(limits: SourceLimits) -> list[str]:
    if not (limits.unkeyed or limits.refused_keys):
        return []
    route_acls, keyed = _keyed_route_acls()
    rules = [
        # gpc 0: unkeyed requests; gpc 1: 401 answers. An IPv6 table holds IPv4 addresses too.
        f"stick-table type ipv6 size 100k expire {6 * WINDOW_S}s store gpc(2),gpc_rate(2,{WINDOW_S}s)",
        # A well-formed API key (store/keys/config.py) as the Bearer token or in `?key=`; anything else (no header,
        # `Authorization: x`, a Basic header, a key of the wrong shape) is none.
        f"acl mod_key req.hdr(authorization) -m reg {BEARER_KEY_PATTERN}",
        f"acl mod_key url_param(key) -m reg {KEY_PATTERN}",
        *route_acls,
        # Keyed: that key, sent to a route that checks it. An ACL cannot be made of others, so a variable holds it.
        f"http-request set-var(txn.mod_keyed) bool(true) if {keyed}",
        "acl mod_keyed var(txn.mod_keyed) -m bool",
        f"http-request track-sc0 {CLIENT_KEY}",
    ]
    if limits.unkeyed:
        rules += [
            "http-request sc-inc-gpc(0,0) if !mod_keyed",
            _refusal(f"Over {limits.unkeyed} requests without an API key in {WINDOW_S} s from this address.")
            + f" if !mod_keyed {{ sc_gpc_rate(0,0) gt {limits.unkeyed} }}",
        ]
    if limits.refused_keys:
        rules += [
            _refusal(f"Over {limits.refused_keys} refused API keys in {WINDOW_S} s from this address.")
            + f" if {{ sc_gpc_rate(1,0) gt {limits.refused_keys} }}",
            "http-response sc-inc-gpc(1,0) if { status 401 }",
        ]
    return rules


def with_our_rules(config: str, limits: SourceLimits, error_path: Path, proxy_secret: str) -> str:
    """`config` with our frontend rules after the `bind` line of Ray's frontend and HAProxy's own errors answered
    from `error_path`; unchanged if the rules are there already."""
    if MARKER in config:
        return config
    match = re.search(rf"^{re.escape(FRONTEND)}\n(\s*)bind [^\n]*\n", config, flags=re.MULTILINE)
    if match is None or not re.search(r"^defaults\n", config, flags=re.MULTILINE):
        # A template we do not know: starting HAProxy without the rules would be silent, so refuse.
        raise ValueError(f"no 'defaults' section, or no '{FRONTEND}' section with a bind line, in HAProxy's config")
    indent = match.group(1)
    block = "".join(f"{indent}{line}\n" for line in frontend_rules(limits, proxy_secret))
    config = config[: match.end()] + block + config[match.end() :]
    config = re.sub(rf"^[ \t]*errorfile ({'|'.join(map(str, OWN_ERRORS))}) .*\n", "", config, flags=re.MULTILINE)
    errorfiles = "".join(f"{indent}errorfile {status} {error_path}\n" for status in OWN_ERRORS)
    return re.sub(r"^defaults\n", lambda found: found.group(0) + errorfiles, config, count=1, flags=re.MULTILINE)


def config_path(haproxy_args: list[str]) -> Path:
    """The file of HAProxy's `-f` argument (Ray passes exactly one)."""
    return Path(haproxy_args[haproxy_args.index("-f") + 1])


def launcher_script(python: str, binary: Path, limits: SourceLimits, proxy_secret_file: Path) -> str:
    """A shell script for RAY_SERVE_HAPROXY_BINARY_PATH: runs `launch` with Ray's arguments. It names the secret's
    file, never the secret: a command line is readable by every local user."""
    command = [python, "-I", "-m", __name__, str(limits.unkeyed), str(limits.refused_keys), str(proxy_secret_file),
               str(binary)]  # fmt: skip
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n'


def launch(argv: list[str]) -> None:
    """argv: unkeyed, refused_keys, the proxy secret's file, the haproxy binary, then Ray's arguments for it."""
    unkeyed, refused_keys, proxy_secret_file, binary, *haproxy_args = argv
    limits = SourceLimits(unkeyed=int(unkeyed), refused_keys=int(refused_keys))
    if "-f" in haproxy_args:
        path = config_path(haproxy_args)
        error_path = path.with_name(ERROR_FILE)
        _replace(error_path, error_file(UNAVAILABLE))
        config = path.read_text()
        patched = with_our_rules(config, limits, error_path, Path(proxy_secret_file).read_text().strip())
        if patched != config:
            _replace(path, patched)
    os.execv(binary, [binary, *haproxy_args])


def _replace(path: Path, text: str) -> None:
    # Ray rewrites the config before each start; replace a file whole so HAProxy never reads half of it.
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    os.replace(staged, path)


if __name__ == "__main__":
    launch(sys.argv[1:])
