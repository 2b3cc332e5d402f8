"""Dashboard users, logins and sessions: scrypt hashes, the session cookie's flags, CSRF on every form, login names
checked first, the brakes on wrong passwords per address and per name (and on the password form's current password),
taken before any hash even by simultaneous requests, the bound on hashes running at once, roles, and the audit log of
all of it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import httpx
import pytest
import redis
from support.api import ADMIN_TOKEN
from support.dashboard import ADMIN, PASSWORD, csrf_of, log_in, make_user, post_form

from dashboard.auth import COOKIE
from dashboard.csrf import LOGIN_COOKIE
from runtime.admin_server import create_admin_listener_app
from serve_app.services import Services
from store import redis_keys
from store.people import users as users_module
from store.people.hash_pool import HASH_MAX_WAITING, HASH_WORKERS
from store.people.login_brake import LOGIN_WINDOW_S, MAX_FAILURES_PER_NAME, MAX_WRONG_CURRENT_PASSWORDS
from store.people.users import verify_password

# The login form's CSRF token is a double-submit cookie: any value, sent in both places, passes.
LOGIN_TOKEN = "a-login-form-token"


class HashMeter:
    """Stands in for scrypt's check of a wrong password: counts the checks and the most running at once."""

    def __init__(self, seconds: float = 0.3):
        self.seconds, self.checks, self.running, self.peak = seconds, 0, 0, 0
        self._lock = threading.Lock()

    def __call__(self, password: str, stored: str) -> bool:
        with self._lock:
            self.checks, self.running = self.checks + 1, self.running + 1
            self.peak = max(self.peak, self.running)
        time.sleep(self.seconds)
        with self._lock:
            self.running -= 1
        return False


@pytest.fixture
async def listener(redis_url):
    """The admin listener's app in the test's own event loop, to send it requests at the same moment."""
    services = Services.connect(redis_url, None)
    yield create_admin_listener_app(services, ADMIN_TOKEN)
    await services.redis.aclose()


async def simultaneous_posts(app, path: str, forms: list[dict], addresses: list[str], cookies: dict) -> list:
    """Posts every form at once, each from its own browser at its address; the answers in the same order."""

    async def post(form: dict, address: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(address, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://admin", cookies=cookies) as browser:
            return await browser.post(path, data=form)

    return await asyncio.gather(*(post(form, address) for form, address in zip(forms, addresses)))


def login_forms(names: list[str]) -> list[dict]:
    return [{"name": name, "password": "wrong-password!", "csrf_token": LOGIN_TOKEN} for name in names]


def audit(client) -> list[tuple]:
    entries = client.get("/admin/v1/audit", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["entries"]
    return [(e["actor"], e["action"], e["target"], e["status"]) for e in entries]


def test_a_password_is_stored_only_as_a_salted_scrypt_hash(client, redis_url):
    make_user(client, "mia")
    with redis.Redis.from_url(redis_url, decode_responses=True) as store:
        stored = store.get(redis_keys.user("mia"))
    assert PASSWORD not in stored and '"password_hash":"scrypt$131072$8$1$' in stored
    hashed = stored.split('"password_hash":"')[1].split('"')[0]
    assert verify_password(PASSWORD, hashed) and not verify_password(PASSWORD + "x", hashed)


def test_pages_need_a_session_and_the_cookie_is_httponly_strict_and_secure_behind_tls(client):
    make_user(client, "mia")
    assert client.get("/dashboard/", follow_redirects=False).headers["location"] == "/dashboard/login"
    cookie = log_in(client, "mia").headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dashboard" in cookie
    assert "Secure" not in cookie
    assert client.get("/dashboard/").status_code == 200
    page = client.get("/dashboard/login")
    response = client.post("/dashboard/login", headers={"x-forwarded-proto": "https"}, follow_redirects=False,
                           data={"name": "mia", "password": PASSWORD, "csrf_token": csrf_of(page.text)})
    assert "Secure" in response.headers["set-cookie"]


def test_a_form_without_the_sessions_csrf_token_is_refused_and_changes_nothing(client):
    make_user(client, "olga", "operator")
    assert log_in(client, "olga").status_code == 303
    for token in ("", "forged"):
        response = client.post("/dashboard/users", data={"csrf_token": token, "name": "eve", "role": "operator",
                                                         "password": PASSWORD})  # fmt: skip
        assert response.status_code == 403 and "CSRF" in response.text
    assert "eve" not in client.get("/dashboard/users").text
    # The login form too: without the login cookie's token, no session is opened.
    client.cookies.clear()
    response = client.post("/dashboard/login", data={"name": "olga", "password": PASSWORD, "csrf_token": "x"})
    assert response.status_code == 403 and "moderation_session" not in response.headers.get("set-cookie", "")


def test_a_malformed_or_huge_login_name_is_refused_before_any_hash_or_store_write(client, redis_url, monkeypatch):
    hashed = []
    monkeypatch.setattr(users_module, "verify_password", lambda *args: hashed.append(args) or False)
    for name in ("x" * 60_000, "-mia", "mia bob", "a" * 65):
        response = log_in(client, name, "whatever-password")
        assert response.status_code == 400 and "1 to 64" in response.text
    assert hashed == []
    with redis.Redis.from_url(redis_url, decode_responses=True) as store:
        assert not list(store.scan_iter(match=f"{redis_keys.PREFIX}login-failures*"))
    assert all(entry[1] != "POST /dashboard/login" for entry in audit(client))


def test_past_the_names_limit_the_guessing_addresses_wait_but_the_right_password_gets_in_from_a_fresh_one(
    client, client_from
):
    make_user(client, "mia")
    guesser = client_from("203.0.113.9")
    for _ in range(MAX_FAILURES_PER_NAME):
        assert log_in(guesser, "mia", "wrong-password!").status_code == 401
    locked = log_in(guesser, "mia")  # even the right password, from the address that guessed
    assert locked.status_code == 429 and 0 < int(locked.headers["retry-after"]) <= LOGIN_WINDOW_S
    assert "moderation_session" not in locked.headers.get("set-cookie", "")
    assert log_in(client_from("198.51.100.4"), "mia").status_code == 303  # the real user, elsewhere


def test_one_address_spraying_a_password_over_many_names_is_stopped(client, client_from):
    client.app.state.dashboard.login_brake.max_failures_per_address = 3  # the default (20) costs 20 scrypt hashes here
    sprayer = client_from("203.0.113.7")
    sprayer.app.state.dashboard.login_brake.max_failures_per_address = 3
    for n in range(3):
        assert log_in(sprayer, f"user-{n}", "Summer2026!!").status_code == 401
    refused = log_in(sprayer, "user-9", "Summer2026!!")
    assert refused.status_code == 429 and "your address" in refused.text


def test_an_ipv6_sprayer_is_braked_by_its_64_whichever_of_its_addresses_it_uses(client, client_from):
    """One IPv6 host holds a whole /64: a fresh address of it per guess must not be a fresh brake."""
    client.app.state.dashboard.login_brake.max_failures_per_address = 3
    sprayers = [client_from(f"2001:db8:7:7::{n:x}") for n in range(1, 5)]
    for sprayer in sprayers:
        sprayer.app.state.dashboard.login_brake.max_failures_per_address = 3
    for n, sprayer in enumerate(sprayers[:3]):
        assert log_in(sprayer, f"user-{n}", "Summer2026!!").status_code == 401
    refused = log_in(sprayers[3], "user-9", "Summer2026!!")
    assert refused.status_code == 429 and "your address" in refused.text
    other_network = client_from("2001:db8:7:8::1")
    other_network.app.state.dashboard.login_brake.max_failures_per_address = 3
    assert log_in(other_network, "user-9", "Summer2026!!").status_code == 401  # another /64: its own brake


def test_wrong_passwords_reach_the_audit_log_only_as_brakes_engage_and_never_name_unknown_users(client, client_from):
    make_user(client, "mia")
    guesser = client_from("203.0.113.9")
    guesser.app.state.dashboard.login_brake.max_failures_per_address = MAX_FAILURES_PER_NAME + 2
    for name in ["mia"] * MAX_FAILURES_PER_NAME + ["ghost-user", "ghost-user-2"]:
        log_in(guesser, name, "wrong-password!")
    for _ in range(5):
        log_in(guesser, "ghost-user-3", "wrong-password!")  # refused (429): not logged either
    logins = [entry for entry in audit(client) if entry[1] == "POST /dashboard/login"]
    assert logins == [("unauthenticated", "POST /dashboard/login", "", 401),  # the address's brake
                      ("unauthenticated", "POST /dashboard/login", "mia", 401)]  # mia's  # fmt: skip


def test_login_and_logout_are_audited_and_logout_ends_the_session(client):
    make_user(client, "mia")
    log_in(client, "mia")
    cookie = client.cookies.get("moderation_session")
    assert post_form(client, "/dashboard/logout", "/dashboard/").status_code == 303
    client.cookies.set("moderation_session", cookie, path="/dashboard")  # a copied cookie is dead too
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303
    assert audit(client)[:2] == [("user:mia", "POST /dashboard/logout", "", 303),
                                 ("user:mia", "POST /dashboard/login", "mia", 303)]  # fmt: skip


def test_a_moderator_cannot_reach_operator_pages_or_forms(client):
    make_user(client, "mia")
    log_in(client, "mia")
    for path in ("/dashboard/keys", "/dashboard/profiles", "/dashboard/profiles/default", "/dashboard/plans",
                 "/dashboard/users", "/dashboard/accounts"):
        assert client.get(path).status_code == 403, path
    token = csrf_of(client.get("/dashboard/").text)
    response = client.post("/dashboard/keys", data={"csrf_token": token, "account": "x", "profile": "default",
                                                    "plan": "default"})  # fmt: skip
    assert response.status_code == 403
    assert "/dashboard/keys" not in client.get("/dashboard/").text  # nor shown the links


def test_a_deleted_users_session_ends_at_once(client):
    make_user(client, "mia")
    log_in(client, "mia")
    deleted = client.delete("/admin/v1/users/mia", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert deleted.status_code == 204
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_every_page_forbids_framing_and_foreign_scripts(client):
    headers = client.get("/dashboard/login").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


def test_a_user_changes_their_password_only_with_the_current_one(client):
    make_user(client, "mia")
    log_in(client, "mia")
    new = "another-long-password"
    assert post_form(client, "/dashboard/password", "/dashboard/password", current="wrong-password-x", new=new,
                     again=new).status_code == 403  # fmt: skip
    assert post_form(client, "/dashboard/password", "/dashboard/password", current=PASSWORD, new=new,
                     again=new + "x").status_code == 400  # fmt: skip
    assert post_form(client, "/dashboard/password", "/dashboard/password", current=PASSWORD, new=new,
                     again=new).status_code == 200  # fmt: skip
    client.cookies.clear()
    assert log_in(client, "mia").status_code == 401 and log_in(client, "mia", new).status_code == 303


def test_a_deleted_and_recreated_user_never_revives_its_old_sessions_even_as_operator(client):
    make_user(client, "mia")
    log_in(client, "mia")
    old_cookie = client.cookies.get("moderation_session")
    assert client.delete("/admin/v1/users/mia", headers=ADMIN).status_code == 204
    make_user(client, "mia", "operator")  # the documented password reset, here with a new role
    client.cookies.clear()
    client.cookies.set("moderation_session", old_cookie, path="/dashboard")
    assert client.get("/dashboard/users", follow_redirects=False).status_code == 303  # to the login page


def test_a_password_change_ends_the_users_other_sessions_and_keeps_this_browser_signed_in(client, client_from):
    make_user(client, "mia")
    other = client_from("198.51.100.4")
    log_in(other, "mia")
    log_in(client, "mia")
    new = "another-long-password"
    changed = post_form(client, "/dashboard/password", "/dashboard/password", current=PASSWORD, new=new, again=new)
    assert changed.status_code == 200 and "other sessions have ended" in changed.text
    assert other.get("/dashboard/", follow_redirects=False).status_code == 303
    assert client.get("/dashboard/").status_code == 200
    assert post_form(client, "/dashboard/settings", "/dashboard/", back="/dashboard/").status_code == 303  # new CSRF


def test_a_role_change_ends_the_users_sessions_and_new_accounts_apply_at_the_next_request(client, client_from):
    make_user(client, "mia")
    log_in(client, "mia")
    moved = client.patch("/admin/v1/users/mia", json={"accounts": ["site-a"]}, headers=ADMIN)
    assert moved.status_code == 200 and moved.json()["accounts"] == ["site-a"]
    assert client.get("/dashboard/", follow_redirects=False).status_code == 200  # accounts: the session stays
    promoted = client.patch("/admin/v1/users/mia", json={"role": "operator"}, headers=ADMIN)
    assert promoted.status_code == 200 and promoted.json()["role"] == "operator"
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303
    make_user(client, "olga", "operator")
    operator = client_from("198.51.100.5")
    log_in(operator, "olga")
    log_in(client, "mia")
    demoted = post_form(operator, "/dashboard/users/mia/assign", "/dashboard/users", role="moderator",
                        accounts="site-a, site-b")  # fmt: skip
    assert demoted.status_code == 303
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303
    assert client.patch("/admin/v1/users/nobody", json={"role": "operator"}, headers=ADMIN).status_code == 404
    assert client.patch("/admin/v1/users/mia", json={"accounts": [""]}, headers=ADMIN).status_code == 400


@pytest.mark.anyio
async def test_simultaneous_wrong_passwords_for_a_name_get_only_its_limit_of_hashes_and_the_rest_429(
    listener, monkeypatch
):
    meter = HashMeter()
    monkeypatch.setattr(users_module, "verify_password", meter)
    answers = await simultaneous_posts(listener, "/dashboard/login", login_forms(["mia"] * 60), ["203.0.113.9"] * 60,
                                       {LOGIN_COOKIE: LOGIN_TOKEN})  # fmt: skip
    assert Counter(answer.status_code for answer in answers) == {401: MAX_FAILURES_PER_NAME, 429: 55}
    assert meter.checks == MAX_FAILURES_PER_NAME


@pytest.mark.anyio
async def test_simultaneous_logins_never_run_more_hashes_at_once_than_the_pool_and_past_its_queue_answer_503(
    listener, redis_url, monkeypatch
):
    meter = HashMeter()
    monkeypatch.setattr(users_module, "verify_password", meter)
    addresses = [f"198.51.100.{n}" for n in range(40)]  # one try per name and address: no brake holds
    answers = await simultaneous_posts(listener, "/dashboard/login", login_forms([f"user-{n}" for n in range(40)]),
                                       addresses, {LOGIN_COOKIE: LOGIN_TOKEN})  # fmt: skip
    statuses = Counter(answer.status_code for answer in answers)
    assert meter.peak == HASH_WORKERS and meter.checks == statuses[401] >= HASH_WORKERS + HASH_MAX_WAITING
    assert statuses[401] + statuses[503] == 40 and statuses[503] > 0
    refused = [address for address, answer in zip(addresses, answers) if answer.status_code == 503]
    assert all(answer.headers["retry-after"] == "1" for answer in answers if answer.status_code == 503)
    with redis.Redis.from_url(redis_url, decode_responses=True) as store:  # nothing was checked: nothing counted
        assert store.mget([redis_keys.login_failures_from(address) for address in refused]) == [None] * len(refused)


@pytest.mark.anyio
async def test_simultaneous_wrong_current_passwords_in_the_password_form_are_braked_per_user(listener, monkeypatch):
    user = await listener.state.dashboard.users.create("mia", "moderator", PASSWORD)
    token, session = await listener.state.dashboard.sessions.create("mia", user.id, user.generation)
    meter = HashMeter()
    monkeypatch.setattr(users_module, "verify_password", meter)
    new = "another-long-password"
    forms = [{"csrf_token": session.csrf_token, "current": "wrong-password-x", "new": new, "again": new}] * 20
    answers = await simultaneous_posts(listener, "/dashboard/password", forms, ["198.51.100.4"] * 20, {COOKIE: token})
    assert Counter(answer.status_code for answer in answers) == {403: MAX_WRONG_CURRENT_PASSWORDS, 429: 15}
    assert meter.checks == MAX_WRONG_CURRENT_PASSWORDS
    monkeypatch.setattr(users_module, "verify_password", verify_password)
    [right] = await simultaneous_posts(listener, "/dashboard/password", [{**forms[0], "current": PASSWORD}],
                                       ["198.51.100.4"], {COOKIE: token})  # fmt: skip
    assert right.status_code == 429 and 0 < int(right.headers["retry-after"]) <= LOGIN_WINDOW_S
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=listener), base_url="http://admin") as admin:
        entries = (await admin.get("/admin/v1/audit", headers=ADMIN)).json()["entries"]
    assert [entry["status"] for entry in entries] == [403] * MAX_WRONG_CURRENT_PASSWORDS  # never a 429
