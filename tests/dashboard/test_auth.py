"""Dashboard users, logins and sessions: scrypt hashes, the session cookie's flags, CSRF on every form, the brake
on wrong passwords per account, roles, and the audit log of all of it."""

from __future__ import annotations

import redis
from support.api import ADMIN_TOKEN
from support.dashboard import PASSWORD, csrf_of, log_in, make_user, post_form

from store import redis_keys
from store.sessions import MAX_LOGIN_FAILURES
from store.users import verify_password


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


def test_wrong_passwords_are_audited_and_past_the_limit_the_account_is_locked_even_for_the_right_one(client):
    make_user(client, "mia")
    for _ in range(MAX_LOGIN_FAILURES):
        assert log_in(client, "mia", "wrong-password!").status_code == 401
    locked = log_in(client, "mia")
    assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
    assert "moderation_session" not in locked.headers.get("set-cookie", "")
    assert log_in(client, "someone-else").status_code == 401  # per account: others are not locked
    assert audit(client)[:2] == [
        ("unauthenticated", "POST /dashboard/login", "someone-else", 401),
        ("unauthenticated", "POST /dashboard/login", "mia", 401),
    ]


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
