"""Who may call the admin API: the admin token, and a brake on guessing it, per source.

The right token is always served, whoever sends it and however many wrong ones came before: a misconfigured
script must never lock the operators out (it did when wrong tokens paused the whole admin API).

Wrong tokens are counted per source address in a sliding window. Past `max_failures` in `window_s`, that source's
wrong tokens answer 429 with Retry-After instead of 401: a script that honours Retry-After (ours, httpx, curl
--retry) backs off, and the noise stays in its own bucket. What this cannot do is stop a guesser that ignores
Retry-After from telling right from wrong: serving the right token always means answering it. Guessing is stopped
by the token's size (at least 32 characters, refused at start otherwise: runtime/settings.py), and every refused
token is in the audit log (store/people/audit_log.py).

The count is per process, which is exact here: one admin listener serves the admin API. At most `max_sources`
sources are tracked; past it the one seen longest ago is forgotten, so memory is bounded whatever the addresses.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict, deque

from fastapi import Request

from serve_app.audit_names import ACTOR_STATE
from serve_app.auth import bearer_token
from serve_app.client_address import limit_key_of
from serve_app.errors import RateLimited, Unauthorized

# Ten typos a minute is generous for a person and useless for a guesser of a 32+ character token.
MAX_FAILURES = 10
WINDOW_S = 60.0
MAX_SOURCES = 10_000


class AdminGuard:
    def __init__(
        self,
        token: str,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        clock=time.monotonic,
        max_sources: int = MAX_SOURCES,
    ):
        self._token = token.encode()
        self.max_failures, self.window_s, self.max_sources = max_failures, window_s, max_sources
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()  # source -> times of its wrong tokens

    def check(self, given: str | None, source: str) -> None:
        """Returns for the right token; else RateLimited while `source` is throttled, Unauthorized otherwise."""
        if hmac.compare_digest((given or "").encode(), self._token):
            return
        now = self._clock()
        failures = self._recent(source, now)
        if len(failures) >= self.max_failures:
            raise RateLimited(
                "Too many wrong admin tokens from this address; wait before trying again.",
                retry_after_s=failures[0] + self.window_s - now,
            )
        failures.append(now)
        raise Unauthorized("The admin API needs Authorization: Bearer $MODERATION_ADMIN_TOKEN.")

    def _recent(self, source: str, now: float) -> deque[float]:
        """The source's failures still inside the window (its bucket, made most recent; created if new)."""
        failures = self._failures.pop(source, None)
        if failures is None:
            failures = deque()
            while len(self._failures) >= self.max_sources:
                self._failures.popitem(last=False)
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        self._failures[source] = failures
        return failures


def require_admin(request: Request) -> None:
    """Dependency of the admin API: the right token passes; a wrong one is 401, or 429 while its source is throttled."""
    # An IPv6 source counts by its /64, as every per-address limit does (serve_app/client_address.py).
    source = limit_key_of(request.client.host) if request.client else "unknown"
    request.app.state.admin_guard.check(bearer_token(request), source)
    setattr(request.state, ACTOR_STATE, "admin-token")  # for the audit log: this call was authenticated
