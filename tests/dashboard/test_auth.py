"""Dashboard users, logins and sessions: scrypt hashes, the session cookie's flags, CSRF on every form, login names
checked first, the brakes on wrong passwords per address and per name, roles, and the audit log of all of it."""

from __future__ import annotations

import redis
from support.api import ADMIN_TOKEN
from support.dashboard import ADMIN, PASSWORD, csrf_of, log_in, make_user, post_form

from store import redis_keys
from store.people import users as users_module
from store.people.sessions import LOGIN_WINDOW_S, MAX_FAILURES_PER_NAME
from store.people.users import verify_password


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
    client.app.state.dashboard.logins.max_failures_per_address = 3  # the default (20) costs 20 scrypt hashes here
    sprayer = client_from("203.0.113.7")
    sprayer.app.state.dashboard.logins.max_failures_per_address = 3
    for n in range(3):
        assert log_in(sprayer, f"user-{n}", "Summer2026!!").status_code == 401
    refused = log_in(sprayer, "user-9", "Summer2026!!")
    assert refused.status_code == 429 and "your address" in refused.text


def test_wrong_passwords_reach_the_audit_log_only_as_brakes_engage_and_never_name_unknown_users(client, client_from):
    make_user(client, "mia")
    guesser = client_from("203.0.113.9")
    guesser.app.state.dashboard.logins.max_failures_per_address = MAX_FAILURES_PER_NAME + 2
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
