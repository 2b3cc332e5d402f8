"""Who may call the admin API: the admin token, and a brake on guessing it.

Wrong tokens are counted in a sliding window. Past `max_failures` in `window_s`, every
admin request (the right token too) answers 429 until the window has room again: a
guesser learns nothing, and the cost is that the real operator waits out an attack.
The count is per process, which is exact here: one admin listener runs the admin API.
"""

from __future__ import annotations

import hmac
import time
from collections import deque

from serve_app.errors import RateLimited, Unauthorized

# Ten typos a minute is generous for a person and useless for a guesser of a 32+ character token.
MAX_FAILURES = 10
WINDOW_S = 60.0


class AdminGuard:
    def __init__(self, token: str, max_failures: int = MAX_FAILURES, window_s: float = WINDOW_S, clock=time.monotonic):
        self._token = token.encode()
        self.max_failures, self.window_s = max_failures, window_s
        self._clock = clock
        self._failures: deque[float] = deque()

    def check(self, given: str | None) -> None:
        """Raises RateLimited while throttled, Unauthorized on a wrong token."""
        now = self._clock()
        while self._failures and self._failures[0] <= now - self.window_s:
            self._failures.popleft()
        if len(self._failures) >= self.max_failures:
            raise RateLimited(
                "Too many wrong admin tokens; the admin API is paused.",
                retry_after_s=self._failures[0] + self.window_s - now,
            )
        if not hmac.compare_digest((given or "").encode(), self._token):
            self._failures.append(now)
            raise Unauthorized("The admin API needs Authorization: Bearer $MODERATION_ADMIN_TOKEN.")
