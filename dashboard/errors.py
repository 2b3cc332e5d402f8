"""The dashboard's errors: HTML pages for people, with the status a script would expect.

The dashboard is for browsers, so its refusals are pages (templates/dashboard/error.html) saying what happened,
not the API's JSON error body; the statuses are the API's (400, 403, 404, 409, 413, 429).
"""

from __future__ import annotations


class PageError(Exception):
    def __init__(self, status: int, message: str, retry_after_s: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after_s = status, message, retry_after_s


class LoginRequired(Exception):
    """No valid session: the browser is sent to the login page."""
