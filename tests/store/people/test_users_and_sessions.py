"""Dashboard users and sessions in the store: scrypt hashes, unique names, sessions stored as hashes, bound to the
user's id and generation and capped per user, accounts. The login brake: tests/store/people/test_login_brake.py."""

from __future__ import annotations

import pytest

from store import redis_keys
import asyncio

from store.people.sessions import MAX_SESSIONS_PER_USER, SessionStore
from store.people.users import (
    MAX_ACCOUNTS_PER_USER, MIN_PASSWORD_CHARS, InvalidAccounts, InvalidPassword, UserExists, UserStore, hash_password,
    valid_login_name, verify_password,
)  # fmt: skip

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
    token, session = await sessions.create("mia", "id-1", 0)
    assert (await sessions.get(token)) == session and len(session.csrf_token) >= 32
    keys = [key async for key in redis_client.scan_iter(match=f"{redis_keys.PREFIX}session:*")]
    assert len(keys) == 1 and token not in keys[0] and 0 < await redis_client.ttl(keys[0]) <= 60
    await sessions.end(token)
    assert await sessions.get(token) is None


def test_a_login_name_must_follow_the_user_name_rule_before_anything_else():
    assert valid_login_name("mia") and valid_login_name("a" * 64)
    for bad in ("", "a" * 65, "x" * 100_000, "-mia", "mia bob", "mia\x00", "ḿia"):
        assert not valid_login_name(bad), bad


async def test_a_user_holds_at_most_its_cap_of_sessions_and_a_new_one_ends_the_oldest(redis_client):
    sessions = SessionStore(redis_client, ttl_s=60, max_per_user=3)
    tokens = [(await sessions.create("mia", "id-1", 0))[0] for _ in range(5)]
    assert [await sessions.get(token) is not None for token in tokens] == [False, False, True, True, True]
    other_user = (await sessions.create("noor", "id-2", 0))[0]
    await sessions.end(tokens[2])  # a logout frees its place
    newest = (await sessions.create("mia", "id-1", 0))[0]
    for token in (tokens[3], tokens[4], newest, other_user):
        assert await sessions.get(token) is not None


async def test_simultaneous_logins_never_leave_a_user_more_sessions_than_the_cap(redis_client):
    sessions = SessionStore(redis_client, ttl_s=60)
    opened = await asyncio.gather(*(sessions.create("mia", "id-1", 0) for _ in range(50)))
    live = [token for token, _ in opened if await sessions.get(token) is not None]
    assert len(live) == MAX_SESSIONS_PER_USER == await redis_client.zcard(redis_keys.user_sessions("mia"))


async def test_a_recreated_user_is_another_user_and_new_passwords_and_roles_are_new_generations(redis_client):
    users = UserStore(redis_client)
    first = await users.create("mia", "moderator", PASSWORD)
    await users.delete("mia")
    second = await users.create("mia", "operator", PASSWORD)
    assert first.id and second.id and first.id != second.id
    changed = await users.set_password("mia", PASSWORD + "!")
    assert changed.generation == second.generation + 1 == (await users.get("mia")).generation
    demoted = await users.assign("mia", role="moderator")
    assert demoted.generation == changed.generation + 1
    same_role = await users.assign("mia", role="moderator", accounts=["site-b", " site-a", "site-b"])
    assert same_role.generation == demoted.generation and same_role.accounts == ["site-a", "site-b"]
    assert await users.assign("nobody", role="operator") is None


async def test_a_users_accounts_are_bounded_and_named(redis_client):
    users = UserStore(redis_client)
    for bad in ([f"a{n}" for n in range(MAX_ACCOUNTS_PER_USER + 1)], [""], ["x" * 201]):
        with pytest.raises(InvalidAccounts):
            await users.create("mia", "moderator", PASSWORD, accounts=bad)
    assert await users.get("mia") is None
    assert (await users.create("mia", "moderator", PASSWORD, accounts=["site-a"])).accounts == ["site-a"]


async def test_concurrent_changes_to_a_user_never_undo_each_other(redis_client):
    users = UserStore(redis_client)
    await users.create("mia", "moderator", PASSWORD)
    await asyncio.gather(*(users.update("mia", generation=lambda user: user.generation + 1) for _ in range(20)),
                         users.update("mia", blur_images=False))  # fmt: skip
    mia = await users.get("mia")
    assert mia.generation == 20 and mia.blur_images is False
    assert await users.update("nobody", blur_images=False) is None
