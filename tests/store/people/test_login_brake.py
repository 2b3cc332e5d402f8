"""The login brake in the store (store/people/login_brake.py): the per-address and per-name brakes on wrong passwords
(taken before the hash, atomically) and the per-user brake on the password form's current password."""

from __future__ import annotations

import asyncio

import pytest

from store import redis_keys
from store.people.login_brake import (
    LOGIN_WINDOW_S, MAX_FAILURES_PER_ADDRESS, MAX_FAILURES_PER_NAME, MAX_WRONG_CURRENT_PASSWORDS, LoginBrake,
)  # fmt: skip

pytestmark = pytest.mark.anyio


async def test_one_address_spraying_one_password_over_many_names_is_stopped_past_its_limit(redis_client):
    logins = LoginBrake(redis_client, max_failures_per_name=3, max_failures_per_address=4, window_s=600)
    for n in range(4):
        attempt = await logins.take(f"user-{n}", "10.0.0.1")
        assert attempt.retry_after_s == 0
    assert attempt.engages.address and not attempt.engages.name  # engaged by the 4th failure, once
    refused = await logins.take("user-9", "10.0.0.1")
    assert refused.reason == "address" and 0 < refused.retry_after_s <= 600
    assert (await logins.take("user-9", "10.0.0.2")).retry_after_s == 0  # another address is not held


async def test_a_locked_name_refuses_only_addresses_that_failed_so_a_fresh_one_gets_in(redis_client):
    logins = LoginBrake(redis_client, max_failures_per_name=3, max_failures_per_address=100, window_s=600)
    for n in range(3):
        attempt = await logins.take("mia", f"10.0.0.{n}")  # a guesser spread over addresses
    assert attempt.engages.name
    for n in range(3):
        refused = await logins.take("mia", f"10.0.0.{n}")
        assert refused.reason == "name" and 0 < refused.retry_after_s <= 600
    real_user = await logins.take("mia", "192.0.2.7")  # from a fresh address
    assert real_user.retry_after_s == 0
    assert (await logins.take("noor", "10.0.0.1")).retry_after_s == 0  # other names are not locked
    await logins.succeeded(real_user)
    assert (await logins.take("mia", "10.0.0.1")).retry_after_s == 0


async def test_guessing_locks_an_address_out_for_at_most_the_window_even_while_it_goes_on(redis_client):
    logins = LoginBrake(redis_client, max_failures_per_name=2, max_failures_per_address=100, window_s=1)
    await logins.take("mia", "192.0.2.7")  # the real user's typo
    for n in range(3):
        await logins.take("mia", f"10.0.0.{n}")
    assert (await logins.take("mia", "192.0.2.7")).reason == "name"
    await asyncio.sleep(1.2)
    await logins.take("mia", "10.0.0.9")  # the guesser keeps the name's count up ...
    await logins.take("mia", "10.0.0.8")
    assert (await logins.take("mia", "10.0.0.9")).reason == "name"
    assert (await logins.take("mia", "192.0.2.7")).retry_after_s == 0  # ... yet the real user's window is over


async def test_simultaneous_login_attempts_pass_a_brake_no_more_often_than_its_limit(redis_client):
    logins = LoginBrake(redis_client)
    one_name = await asyncio.gather(*(logins.take("mia", "10.0.0.1") for _ in range(60)))
    assert sum(attempt.retry_after_s == 0 for attempt in one_name) == MAX_FAILURES_PER_NAME
    assert sum(attempt.engages.name for attempt in one_name) == 1
    many_names = await asyncio.gather(*(logins.take(f"user-{n}", "10.0.0.2") for n in range(60)))
    assert sum(attempt.retry_after_s == 0 for attempt in many_names) == MAX_FAILURES_PER_ADDRESS
    assert sum(attempt.engages.address for attempt in many_names) == 1


async def test_an_attempt_counts_as_wrong_until_its_password_proves_right_or_goes_unchecked(redis_client):
    logins = LoginBrake(redis_client, max_failures_per_name=5, max_failures_per_address=5, window_s=600)
    name_key = redis_keys.login_failures(redis_keys.secret_sha256_hex("mia"))
    address_key = redis_keys.login_failures_from("10.0.0.1")
    await logins.take("mia", "10.0.0.1")  # a wrong password
    right = await logins.take("mia", "10.0.0.1")
    assert await redis_client.mget(name_key, address_key) == ["2", "2"]
    await logins.succeeded(right)  # the name's count starts again; the address keeps its wrong one
    assert await redis_client.mget(name_key, address_key) == [None, "1"]
    unchecked = await logins.take("noor", "10.0.0.1")  # the hash pool was full
    await logins.give_back(unchecked)
    noor_key = redis_keys.login_failures(redis_keys.secret_sha256_hex("noor"))
    assert await redis_client.mget(noor_key, address_key) == [None, "1"] and 0 < await redis_client.ttl(address_key)


async def test_a_login_name_is_counted_under_its_hash_so_any_name_costs_the_same(redis_client):
    logins = LoginBrake(redis_client)
    await logins.take("a" * 64, "10.0.0.1")
    keys = [key async for key in redis_client.scan_iter(match=f"{redis_keys.PREFIX}login-failures:*")]
    assert len(keys) == 1 and "a" * 64 not in keys[0] and len(keys[0]) == len(redis_keys.login_failures("0" * 64))


async def test_simultaneous_guesses_at_the_current_password_pass_no_more_often_than_the_users_limit(redis_client):
    brakes = LoginBrake(redis_client)
    waits = await asyncio.gather(*(brakes.take_password_check("mia") for _ in range(30)))
    assert waits.count(0) == MAX_WRONG_CURRENT_PASSWORDS
    assert all(0 < wait <= LOGIN_WINDOW_S for wait in waits if wait)
    await brakes.give_back_password_check("mia")  # one of them proved right
    assert await brakes.take_password_check("mia") == 0 and await brakes.take_password_check("mia") > 0
    assert await brakes.take_password_check("noor") == 0  # per user
