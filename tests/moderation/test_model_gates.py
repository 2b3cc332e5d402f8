"""The model gates in front of a model: a cap on calls at once, turns by account, the excess refused early."""

from __future__ import annotations

import asyncio

import pytest

from moderation.model_gates import GateRules, FairGate, ModelGates
from moderation.errors import Overloaded, TooManyInFlight

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def hold(gate: FairGate, account: str, release: asyncio.Event, order: list[str]) -> None:
    async with gate.passed(account):
        order.append(account)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_at_most_max_active_calls_run_at_once_and_the_rest_wait():
    gate, release, order = FairGate(GateRules(max_active=2)), asyncio.Event(), []
    tasks = [asyncio.create_task(hold(gate, "a", release, order)) for _ in range(5)]
    await settle()
    assert (len(order), gate.active, gate.waiting) == (2, 2, 3)
    release.set()
    await asyncio.gather(*tasks)
    assert (len(order), gate.active, gate.waiting) == (5, 0, 0)


async def test_waiting_calls_are_let_through_account_by_account_so_a_flood_waits_behind_itself():
    gate, order = FairGate(GateRules(max_active=1)), []
    releases = [asyncio.Event() for _ in range(6)]
    accounts = ["flood"] * 5 + ["quiet"]  # the quiet account's one call comes last
    tasks = []
    for account, release in zip(accounts, releases):
        tasks.append(asyncio.create_task(hold(gate, account, release, order)))
        await settle()
    for release in releases:
        release.set()
        await settle()
    await asyncio.gather(*tasks)
    # The flood's first call was running; the quiet account's call goes right after it, not after the flood's four.
    assert order == ["flood", "flood", "quiet", "flood", "flood", "flood"]


async def test_past_max_waiting_a_call_is_refused_at_once():
    gate, release = FairGate(GateRules(max_active=1, max_waiting=2)), asyncio.Event()
    tasks = [asyncio.create_task(hold(gate, "a", release, [])) for _ in range(3)]
    await settle()
    with pytest.raises(Overloaded):
        await hold(gate, "b", release, [])
    release.set()
    await asyncio.gather(*tasks)


async def measured_gate(clock: Clock) -> FairGate:
    """A gate of 2 calls at once, a 3 s bound, that has measured one call of 1 s (a round of two calls: 1 s)."""
    gate = FairGate(GateRules(max_active=2, max_wait_s=3.0), clock)
    first = asyncio.Event()
    task = asyncio.create_task(hold(gate, "a", first, []))
    await settle()
    clock.now += 1.0
    first.set()
    await task
    assert gate.mean_call_s == pytest.approx(1.0)
    return gate


async def test_an_account_whose_own_waiting_calls_would_make_its_next_wait_too_long_gets_429_and_others_still_wait():
    gate, release = await measured_gate(Clock()), asyncio.Event()
    tasks = [asyncio.create_task(hold(gate, "flood", release, [])) for _ in range(2 + 6)]  # 2 run; 6 wait (3 rounds)
    await settle()
    assert gate.waiting == 6 and gate.expected_wait_s(gate.ahead_of_next_call("flood")) == pytest.approx(4.0)
    with pytest.raises(TooManyInFlight):
        await hold(gate, "flood", release, [])
    # Another account's call goes in at the next round: 1 s, let through.
    assert gate.expected_wait_s(gate.ahead_of_next_call("quiet")) == pytest.approx(1.0)
    tasks.append(asyncio.create_task(hold(gate, "quiet", release, [])))
    await settle()
    assert gate.waiting == 7
    release.set()
    await asyncio.gather(*tasks)


async def test_when_even_an_account_with_nothing_waiting_would_wait_too_long_the_call_is_overloaded_503():
    gate, release = await measured_gate(Clock()), asyncio.Event()
    running = [asyncio.create_task(hold(gate, "r", release, [])) for _ in range(2)]
    waiting = [asyncio.create_task(hold(gate, f"site-{n}", release, [])) for n in range(6)]  # one each: 3 rounds
    await settle()
    assert gate.expected_wait_s(gate.ahead_of_next_call("new")) == pytest.approx(4.0)
    with pytest.raises(Overloaded):
        await hold(gate, "new", release, [])
    release.set()
    await asyncio.gather(*running, *waiting)


async def test_a_waiting_call_that_is_cancelled_leaves_the_line_and_takes_no_place():
    gate, release, order = FairGate(GateRules(max_active=1)), asyncio.Event(), []
    running = asyncio.create_task(hold(gate, "a", release, order))
    await settle()
    given_up = asyncio.create_task(hold(gate, "b", release, order))
    await settle()
    given_up.cancel()
    await settle()
    assert gate.waiting == 0
    release.set()
    await running
    assert (order, gate.active) == (["a"], 0)


async def test_a_place_handed_to_a_call_that_was_cancelled_at_that_moment_passes_on():
    gate, release, order = FairGate(GateRules(max_active=1)), asyncio.Event(), []
    release.set()
    held = gate.passed("a")
    await held.__aenter__()
    unlucky = asyncio.create_task(hold(gate, "b", release, order))
    after = asyncio.create_task(hold(gate, "c", release, order))
    await settle()
    await held.__aexit__(None, None, None)  # hands the place to "b" without letting it run yet
    unlucky.cancel()  # "b" gives up before it runs
    async with asyncio.timeout(1):  # a lost place would leave "c" waiting for ever
        await asyncio.gather(unlucky, after, return_exceptions=True)
    assert order == ["c"] and gate.active == 0


async def test_a_failing_call_gives_its_place_back():
    gate = FairGate(GateRules(max_active=1))
    with pytest.raises(RuntimeError):
        async with gate.passed("a"):
            raise RuntimeError("model down")
    assert gate.active == 0
    async with gate.passed("a"):
        assert gate.active == 1


async def test_short_text_long_text_image_and_image_text_work_wait_at_gates_of_their_own():
    gates = ModelGates({kind: GateRules(max_active=1) for kind in ("text", "long_text", "image", "image_text")})
    async with gates.passed("long_text", "a"), gates.passed("image_text", "a"):
        async with asyncio.timeout(1):
            async with gates.passed("text", "b"), gates.passed("image", "b"):  # behind none of them
                assert [gate.active for gate in gates.gates.values()] == [1, 1, 1, 1]


def test_the_shipped_gates_include_one_for_images_whose_text_is_read():
    from moderation.model_gates import DEFAULT_GATES
    from runtime.settings import Settings

    assert set(DEFAULT_GATES) == set(Settings().gate_rules()) == {"text", "long_text", "image", "image_text"}


@pytest.mark.parametrize("rules", [dict(max_active=0), dict(max_active=1, max_waiting=-1), dict(max_active=1, max_wait_s=0)])
def test_rules_that_would_let_nothing_through_are_refused(rules):
    with pytest.raises(ValueError):
        GateRules(**rules)


def test_long_text_work_has_a_wait_bound_of_its_own_longer_than_short_work_and_set_apart(monkeypatch):
    # Its calls take seconds each: at the short bound the plan's own allowance from three accounts was refused.
    from runtime.settings import Settings

    rules = Settings().gate_rules()
    assert rules["long_text"].max_wait_s == 20.0 > rules["text"].max_wait_s == rules["image"].max_wait_s == 10.0
    monkeypatch.setenv("MODERATION_ADMIT_LONG_TEXT_MAX_WAIT_S", "7.5")
    monkeypatch.setenv("MODERATION_ADMIT_MAX_WAIT_S", "4")
    rules = Settings().gate_rules()
    assert (rules["long_text"].max_wait_s, rules["text"].max_wait_s, rules["image_text"].max_wait_s) == (7.5, 4.0, 4.0)


async def test_a_call_let_through_by_the_long_bound_would_be_refused_by_the_short_one():
    clock = Clock()
    long_gate = FairGate(GateRules(max_active=2, max_wait_s=20.0), clock)
    long_gate.mean_call_s = 6.0  # a batch of ten long texts on busy cores
    short_gate = FairGate(GateRules(max_active=2, max_wait_s=10.0), clock)
    short_gate.mean_call_s = 6.0
    release = asyncio.Event()
    tasks = [asyncio.create_task(hold(gate, f"long-{n}", release, [])) for gate in (long_gate, short_gate)
             for n in range(4)]  # two run, two wait, one account each
    await settle()
    with pytest.raises(Overloaded):
        await hold(short_gate, "third", release, [])
    admitted = asyncio.create_task(hold(long_gate, "third", release, []))
    await settle()
    assert long_gate.waiting == 3
    release.set()
    await asyncio.gather(*tasks, admitted)
