"""Driving the dashboard (dashboard) over HTTP in tests: log in, read a page's CSRF token, post a form."""

from __future__ import annotations

import re

import httpx
from support.api import ADMIN_TOKEN

PASSWORD = "a-long-enough-password"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def log_in(client, name: str, password: str = PASSWORD) -> httpx.Response:
    """Opens the login page (for its CSRF cookie and field), then posts the form; does not follow the redirect."""
    page = client.get("/dashboard/login")
    return client.post("/dashboard/login", data={"name": name, "password": password, "csrf_token": csrf_of(page.text)},
                       follow_redirects=False)  # fmt: skip


def post_form(client, path: str, page_path: str, **fields) -> httpx.Response:
    """Posts a form the way the page at `page_path` does: with that page's CSRF token."""
    token = csrf_of(client.get(page_path).text)
    return client.post(path, data={"csrf_token": token, **fields}, follow_redirects=False)


def make_user(client, name: str, role: str = "moderator", accounts: list[str] | None = None) -> None:
    """Through the admin API, as `moderation-admin users create` does; a moderator works on `accounts`."""
    body = {"name": name, "role": role, "password": PASSWORD, "accounts": accounts or []}
    response = client.post("/admin/v1/users", json=body, headers=ADMIN)
    assert response.status_code == 201, response.text
    assert set(response.json()) == {"name", "role", "created_at", "accounts"}
