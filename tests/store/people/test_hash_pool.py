"""The process's bound on password hashes (store/people/hash_pool.py): at most `workers` run at once; a password check
past the queue is refused at once and runs nothing; a new password waits its turn; a caller that leaves early does not
hold its place."""

from __future__ import annotations

import asyncio
import threading

import pytest

from store.people import users as users_module
from store.people.hash_pool import HASH_MAX_WAITING, HASH_WORKERS, HashesBusy, HashPool
from store.people.users import UserStore

pytestmark = pytest.mark.anyio


class HeldHashes:
    """Stands in for scrypt: each call starts, then holds its worker until `release()`."""

    def __init__(self):
        self.answer, self.started, self._go = False, 0, threading.Event()
        self._lock = threading.Lock()

    def __call__(self, *args) -> object:
        with self._lock:
            self.started += 1
        self._go.wait(10)
        return self.answer

    def release(self) -> None:
        self._go.set()


@pytest.fixture
def hashes():
    """Held hashes, released at the test's end whatever happened (the process's pool must not stay full)."""
    held = HeldHashes()
    yield held
    held.release()


async def test_password_checks_never_run_more_hashes_at_once_than_the_workers_and_past_the_queue_are_refused(hashes):
    pool = HashPool(workers=2, max_waiting=3)
    checks = [asyncio.create_task(pool.run_or_refuse(hashes)) for _ in range(8)]
    await asyncio.sleep(0.3)
    assert hashes.started == 2
    refused = [check for check in checks if check.done()]
    assert len(refused) == 3 and all(isinstance(check.exception(), HashesBusy) for check in refused)
    hashes.release()
    assert await asyncio.gather(*(check for check in checks if check not in refused)) == [False] * 5
    assert hashes.started == 5  # the refused ones never ran
    assert await pool.run_or_refuse(hashes) is False  # drained: checks are taken again


async def test_a_new_password_waits_its_turn_instead_of_being_refused_and_still_counts_against_checks(hashes):
    pool = HashPool(workers=1, max_waiting=0)
    new_passwords = [asyncio.create_task(pool.run_in_turn(hashes)) for _ in range(3)]
    await asyncio.sleep(0.3)
    assert hashes.started == 1 and not any(task.done() for task in new_passwords)
    with pytest.raises(HashesBusy):
        await pool.run_or_refuse(hashes)
    hashes.release()
    assert await asyncio.gather(*new_passwords) == [False] * 3


async def test_a_check_whose_caller_left_before_it_started_frees_its_place(hashes):
    pool = HashPool(workers=1, max_waiting=1)
    running = asyncio.create_task(pool.run_or_refuse(hashes))
    waiting = asyncio.create_task(pool.run_or_refuse(hashes))
    await asyncio.sleep(0.2)
    waiting.cancel()  # a closed connection
    await asyncio.sleep(0.1)
    late = asyncio.create_task(pool.run_or_refuse(hashes))  # the place it held is free again
    await asyncio.sleep(0.1)
    assert not late.done()
    hashes.release()
    assert await running is False and await late is False and hashes.started == 2


async def test_every_user_store_of_the_process_checks_passwords_within_one_bound(redis_client, monkeypatch, hashes):
    monkeypatch.setattr(users_module, "verify_password", hashes)
    first, second = UserStore(redis_client), UserStore(redis_client)  # the admin API makes one per request
    held = [asyncio.create_task(first.authenticate("mia", "a guess")) for _ in range(HASH_WORKERS + HASH_MAX_WAITING)]
    await asyncio.sleep(0.3)
    with pytest.raises(HashesBusy):
        await second.authenticate("mia", "a guess")
    hashes.release()
    assert await asyncio.gather(*held) == [None] * len(held)


async def test_user_creations_and_password_changes_hash_within_the_same_bound(redis_client, monkeypatch, hashes):
    hashes.answer = "scrypt$stub"
    monkeypatch.setattr(users_module, "hash_password", hashes)
    users = UserStore(redis_client, hashes=HashPool(workers=1, max_waiting=0))
    password = "correct horse battery"
    changes = [asyncio.create_task(change) for change in (
        users.create("mia", "moderator", password), users.create("noor", "moderator", password),
        users.set_password("mia", password + "!"),
    )]  # fmt: skip
    await asyncio.sleep(0.3)
    assert hashes.started == 1
    hashes.release()
    await asyncio.gather(*changes)
    assert hashes.started == 3
