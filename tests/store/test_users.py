"""Dashboard users and sessions in the store: scrypt hashes, unique names, sessions stored as hashes, the per-account
brake on wrong passwords."""

from __future__ import annotations

import pytest

from store import redis_keys
from store.sessions import LoginThrottle, SessionStore
from store.users import MIN_PASSWORD_CHARS, InvalidPassword, UserExists, UserStore, hash_password, verify_password

pytestmark = pytest.mark.anyio
PASSWORD = "correct horse battery"


def test_each_hash_has_its_own_salt_and_only_its_password_verifies():
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first != second and first.startswith("scrypt$131072$8$1$")
    assert verify_password(PASSWORD, first) and verify_password(PASSWORD, second)
    assert not verify_password(PASSWORD.upper(), first)
    assert not verify_password(PASSWORD, "md5$whatever") and not verify_password(PASSWORD, "garbage")


def test_a_password_too_short_or_too_long_is_refused():
    for bad in ("x" * (MIN_PASSWORD_CHARS - 1), "x" * 1025):
        with pytest.raises(InvalidPassword):
            hash_password(bad)


async def test_a_name_is_taken_once_and_authentication_needs_the_password(redis_client):
    users = UserStore(redis_client)
    await users.create("mia", "moderator", PASSWORD)
    with pytest.raises(UserExists):
        await users.create("mia", "operator", PASSWORD)
    assert (await users.get("mia")).role == "moderator"
    assert (await users.authenticate("mia", PASSWORD)).name == "mia"
    assert await users.authenticate("mia", "wrong password") is None
    assert await users.authenticate("nobody", PASSWORD) is None
    assert await users.delete("mia") and await users.get("mia") is None and await users.list() == []


async def test_the_store_keeps_a_sessions_hash_never_its_cookie(redis_client):
    sessions = SessionStore(redis_client, ttl_s=60)
    token, session = await sessions.create("mia")
    assert (await sessions.get(token)) == session and len(session.csrf_token) >= 32
    keys = [key async for key in redis_client.scan_iter(match=f"{redis_keys.PREFIX}session:*")]
    assert len(keys) == 1 and token not in keys[0] and 0 < await redis_client.ttl(keys[0]) <= 60
    await sessions.end(token)
    assert await sessions.get(token) is None


async def test_past_the_limit_of_wrong_passwords_the_account_waits_out_the_window(redis_client):
    logins = LoginThrottle(redis_client, max_failures=3, window_s=600)
    for _ in range(3):
        assert await logins.locked_for_s("mia") == 0
        await logins.failed("mia")
    assert 0 < await logins.locked_for_s("mia") <= 600
    assert await logins.locked_for_s("noor") == 0
    await logins.succeeded("mia")
    assert await logins.locked_for_s("mia") == 0
