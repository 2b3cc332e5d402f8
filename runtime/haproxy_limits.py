"""Per-source limits in HAProxy, before any request reaches the ingress's Python event loop.

Why: the per-account limits (rate, `max_in_flight`, admission) need a key, so a flood without one (`/healthz`, a
404) or with made-up keys (each a 401 after a store round trip) was bounded only by what the ingress replica's event
loop could answer, and on a 2-core machine 400 `/healthz` calls from 16 callers delayed another account's text by
6 s. HAProxy counts, per client address, over a sliding 10 s:

- requests that carry no API key (no `Authorization` header, no `?key=`): past `unkeyed` of them, that address's
  keyless requests are answered 429 `rate_limited` by HAProxy itself, with Retry-After;
- answers of 401 (a wrong or revoked key): past `refused_keys` of them, every request from that address is
  answered 429 the same way until the rate falls back.

Refused requests count too, so an address that keeps flooding stays refused, and one that waits Retry-After is
served again. Keyed requests of an address with few 401s are never counted: a busy site's backend, one address
sending all its users' content, meets only its plan's limits.

Ray 2.60's template (ray/serve/_private/haproxy_templates.py) has no place for frontend rules, and Ray writes the
config again before every HAProxy start and reload. So Ray is pointed at a launcher (`launcher_script`) instead of
the binary: it adds these rules to the config Ray wrote, then execs the verified binary with Ray's arguments
unchanged (same process, same command line, so Ray's reloads and `-sf` keep working).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

WINDOW_S = 10
MARKER = "# moderation-service: per-source limits (runtime/haproxy_limits.py)"
FRONTEND = "frontend http_frontend"
RETRY_AFTER_S = WINDOW_S


@dataclass(frozen=True)
class SourceLimits:
    """Per client address and sliding 10 s window. 0 turns a limit off."""

    unkeyed: int = 100
    refused_keys: int = 50


def _refusal(message: str) -> str:
    body = '{"error": {"code": "rate_limited", "message": "%s"}}' % message
    return (f"http-request return status 429 content-type application/json hdr Retry-After {RETRY_AFTER_S} "
            f"hdr X-Request-ID %[uuid] string '{body}'")  # fmt: skip


def frontend_rules(limits: SourceLimits) -> list[str]:
    """The lines that go right after the frontend's `bind`, ahead of Ray's own rules."""
    if not (limits.unkeyed or limits.refused_keys):
        return []
    rules = [
        MARKER,
        # gpc 0: keyless requests; gpc 1: 401 answers. An IPv6 table holds IPv4 addresses too.
        f"stick-table type ipv6 size 100k expire {6 * WINDOW_S}s store gpc(2),gpc_rate(2,{WINDOW_S}s)",
        "acl mod_keyed req.hdr(authorization) -m found",
        "acl mod_keyed url_param(key) -m found",
        "http-request track-sc0 src",
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


def with_source_limits(config: str, limits: SourceLimits) -> str:
    """`config` with the rules after the `bind` line of Ray's frontend; unchanged if they are there already."""
    if MARKER in config:
        return config
    rules = frontend_rules(limits)
    match = re.search(rf"^{re.escape(FRONTEND)}\n(\s*)bind [^\n]*\n", config, flags=re.MULTILINE)
    if match is None:
        # A template we do not know: starting HAProxy without the limits would be silent, so refuse.
        raise ValueError(f"no '{FRONTEND}' section with a bind line in HAProxy's config")
    indent = match.group(1)
    block = "".join(f"{indent}{line}\n" for line in rules)
    return config[: match.end()] + block + config[match.end() :]


def config_path(haproxy_args: list[str]) -> Path:
    """The file of HAProxy's `-f` argument (Ray passes exactly one)."""
    return Path(haproxy_args[haproxy_args.index("-f") + 1])


def launcher_script(python: str, binary: Path, limits: SourceLimits) -> str:
    """A shell script for RAY_SERVE_HAPROXY_BINARY_PATH: runs `launch` with Ray's arguments."""
    command = [python, "-I", "-m", __name__, str(limits.unkeyed), str(limits.refused_keys), str(binary)]
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n'


def launch(argv: list[str]) -> None:
    """argv: unkeyed, refused_keys, the haproxy binary, then Ray's arguments for it."""
    unkeyed, refused_keys, binary, *haproxy_args = argv
    limits = SourceLimits(unkeyed=int(unkeyed), refused_keys=int(refused_keys))
    if "-f" in haproxy_args:
        path = config_path(haproxy_args)
        config = path.read_text()
        patched = with_source_limits(config, limits)
        if patched != config:
            # Ray rewrites the file before each start; replace it whole so HAProxy never reads half of it.
            staged = path.with_name(path.name + ".limits")
            staged.write_text(patched)
            os.replace(staged, path)
    os.execv(binary, [binary, *haproxy_args])


if __name__ == "__main__":
    launch(sys.argv[1:])
