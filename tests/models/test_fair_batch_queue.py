"""The fair batch queue (models/fair_batch_queue.py): a batch takes one item of each account in turn, the least
recently served first; within an account single texts, then the likelier to change a decision, then the older; when
full, the largest account's least deserving item gives its place to an account with fewer, and its own newcomers are
refused at once; callers that gave up hold no place; a failing run fails its own batch only."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from models.fair_batch_queue import FairBatchQueue, QueueFull

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Text:
    name: str
    account: str
    from_batch: bool = False
    change_chance: float = 1.0


class HeldModel:
    """Holds every batch until `release()` (so what arrives meanwhile waits), recording each batch's names."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.batches: list[list[str]] = []
        self._open = asyncio.Event()

    def release(self) -> None:
        self._open.set()

    async def run(self, items: list[Text]) -> list[str]:
        self.batches.append([item.name for item in items])
        await self._open.wait()
        if any(item.name == self.fail_on for item in items):
            raise RuntimeError("the model failed")
        return [item.name for item in items]


def fair_queue(model: HeldModel, max_batch_size: int = 16, capacity: int = 16) -> FairBatchQueue:
    return FairBatchQueue(model.run, max_batch_size, 0.0, capacity=capacity)


async def held(queue: FairBatchQueue, model: HeldModel, first: Text) -> asyncio.Task:
    """`first` running as a batch of its own: what is submitted next waits."""
    running = asyncio.ensure_future(queue.submit(first))
    while not model.batches:
        await asyncio.sleep(0)
    return running


async def refused(task: asyncio.Future) -> None:
    """`task`'s caller was told its item has no place (refused, or evicted) without waiting for the model."""
    with pytest.raises(QueueFull):
        await asyncio.wait_for(task, 0.1)


async def answered_once_released(model: HeldModel, *tasks: asyncio.Task) -> list[str]:
    model.release()
    return list(await asyncio.gather(*tasks))


async def submitted(queue: FairBatchQueue, *texts: Text) -> list[asyncio.Task]:
    """Each text submitted in this order, and admitted (or refused) before this returns."""
    tasks = [asyncio.ensure_future(queue.submit(text)) for text in texts]
    await asyncio.sleep(0)
    return tasks


async def test_a_batch_takes_one_item_of_each_account_in_turn():
    model = HeldModel()
    queue = fair_queue(model)
    await held(queue, model, Text("z", "Z"))
    await submitted(queue, Text("a1", "A"), Text("a2", "A"), Text("a3", "A"), Text("b1", "B"), Text("b2", "B"),
                    Text("c1", "C"))  # fmt: skip
    model.release()
    await asyncio.sleep(0.01)
    assert model.batches[1] == ["a1", "b1", "c1", "a2", "b2", "a3"]  # a FIFO: a1, a2, a3, b1, b2, c1


async def test_the_account_served_least_recently_goes_first():
    model = HeldModel()
    queue = fair_queue(model, max_batch_size=2)
    await held(queue, model, Text("a0", "A"))
    await submitted(queue, Text("a1", "A"), Text("a2", "A"), Text("b1", "B"), Text("c1", "C"))
    model.release()
    await asyncio.sleep(0.01)
    assert model.batches == [["a0"], ["b1", "c1"], ["a1", "a2"]]


async def test_within_an_account_single_texts_go_before_a_many_text_requests():
    model = HeldModel()
    queue = fair_queue(model)
    await held(queue, model, Text("z", "Z"))
    await submitted(queue, Text("batch1", "A", from_batch=True), Text("batch2", "A", from_batch=True),
                    Text("single", "A", change_chance=0.1))  # fmt: skip
    model.release()
    await asyncio.sleep(0.01)
    assert model.batches[1] == ["single", "batch1", "batch2"]


async def test_within_an_account_the_likelier_to_change_a_decision_goes_first_then_the_older():
    model = HeldModel()
    queue = fair_queue(model)
    await held(queue, model, Text("z", "Z"))
    await submitted(queue, Text("low", "A", change_chance=0.2), Text("high", "A", change_chance=0.9),
                    Text("mid", "A", change_chance=0.5), Text("high_later", "A", change_chance=0.9))  # fmt: skip
    model.release()
    await asyncio.sleep(0.01)
    assert model.batches[1] == ["high", "high_later", "mid", "low"]


async def test_when_full_the_flooding_accounts_least_deserving_item_gives_its_place_to_another_account():
    model = HeldModel()
    queue = fair_queue(model, capacity=4)
    await held(queue, model, Text("z", "Z"))
    batch, low, low_newest, sure = await submitted(
        queue, Text("batch", "A", from_batch=True, change_chance=0.8), Text("low", "A", change_chance=0.1),
        Text("low_newest", "A", change_chance=0.1), Text("sure", "A", change_chance=0.9),
    )  # fmt: skip
    (b1,) = await submitted(queue, Text("b1", "B"))
    await refused(batch)  # a many-text request's first, though not the newest
    assert not low_newest.done()
    (c1,) = await submitted(queue, Text("c1", "C"))
    await refused(low_newest)  # then the lowest change_chance, the newest of those
    assert queue.waiting == 4 and queue.waiting_by_account() == {"A": 2, "B": 1, "C": 1}
    assert await answered_once_released(model, low, sure, b1, c1) == ["low", "sure", "b1", "c1"]


async def test_when_full_the_evicted_item_is_the_largest_accounts_even_if_another_holds_a_less_deserving_one():
    model = HeldModel()
    queue = fair_queue(model, capacity=4)
    await held(queue, model, Text("z", "Z"))
    a1, a2, a3, b_batch = await submitted(queue, Text("a1", "A"), Text("a2", "A"), Text("a3", "A"),
                                          Text("b_batch", "B", from_batch=True, change_chance=0.0))  # fmt: skip
    (c1,) = await submitted(queue, Text("c1", "C"))
    await refused(a3)
    assert queue.waiting_by_account() == {"A": 2, "B": 1, "C": 1}
    assert await answered_once_released(model, a1, a2, b_batch, c1) == ["a1", "a2", "b_batch", "c1"]


async def test_when_full_a_newcomer_of_the_largest_account_is_refused_at_once():
    model = HeldModel()
    queue = fair_queue(model, capacity=3)
    await held(queue, model, Text("z", "Z"))
    kept = await submitted(queue, Text("a1", "A"), Text("a2", "A"), Text("a3", "A"))
    with pytest.raises(QueueFull):
        await asyncio.wait_for(queue.submit(Text("a4", "A", change_chance=1.0)), 0.1)  # while the model still runs
    assert queue.waiting_by_account() == {"A": 3}
    model.release()
    assert await asyncio.gather(*kept) == ["a1", "a2", "a3"]


async def test_when_full_a_newcomer_whose_account_holds_as_many_as_the_largest_is_refused():
    model = HeldModel()
    queue = fair_queue(model, capacity=4)
    await held(queue, model, Text("z", "Z"))
    await submitted(queue, Text("a1", "A"), Text("a2", "A"), Text("b1", "B"), Text("b2", "B"))
    with pytest.raises(QueueFull):
        await asyncio.wait_for(queue.submit(Text("b3", "B")), 0.1)
    assert queue.waiting_by_account() == {"A": 2, "B": 2}
    model.release()


async def test_a_caller_that_gave_up_is_dropped_and_holds_no_place():
    model = HeldModel()
    queue = fair_queue(model, capacity=2)
    await held(queue, model, Text("z", "Z"))
    given_up, kept = await submitted(queue, Text("given_up", "A"), Text("kept", "A"))
    given_up.cancel()
    await asyncio.sleep(0)
    assert queue.waiting == 1
    (later,) = await submitted(queue, Text("later", "A"))  # the place is free again: not refused
    model.release()
    assert await asyncio.gather(kept, later) == ["kept", "later"]
    assert model.batches == [["z"], ["kept", "later"]]


async def test_a_failing_run_fails_its_own_batch_only_and_the_queue_goes_on():
    model = HeldModel(fail_on="bad")
    queue = fair_queue(model, max_batch_size=2)
    first = await held(queue, model, Text("z", "Z"))
    bad, b1, c1 = await submitted(queue, Text("bad", "A"), Text("b1", "B"), Text("c1", "C"))
    model.release()
    answers = await asyncio.gather(first, bad, b1, c1, return_exceptions=True)
    assert answers[0] == "z" and answers[3] == "c1"
    assert isinstance(answers[1], RuntimeError) and isinstance(answers[2], RuntimeError)
    assert model.batches == [["z"], ["bad", "b1"], ["c1"]]
    assert await queue.submit(Text("d1", "D")) == "d1"


async def test_no_more_than_capacity_wait_and_no_batch_is_over_max_batch_size():
    model = HeldModel()
    queue = fair_queue(model, max_batch_size=2, capacity=5)
    await held(queue, model, Text("z", "Z"))
    tasks = await submitted(queue, *(Text(f"a{n}", "A") for n in range(7)))
    assert queue.waiting == 5
    assert all(isinstance(task.exception(), QueueFull) for task in tasks[5:])
    model.release()
    assert await asyncio.gather(*tasks[:5]) == [f"a{n}" for n in range(5)]
    assert model.batches == [["z"], ["a0", "a1"], ["a2", "a3"], ["a4"]]


async def test_the_batch_size_set_later_holds_from_the_next_batch():
    model = HeldModel()
    queue = fair_queue(model, max_batch_size=4)
    await held(queue, model, Text("z", "Z"))
    tasks = await submitted(queue, *(Text(f"a{n}", "A") for n in range(3)))
    queue.set_max_batch_size(1)
    queue.set_batch_wait_timeout_s(0.0)
    model.release()
    await asyncio.gather(*tasks)
    assert model.batches == [["z"], ["a0"], ["a1"], ["a2"]]


@pytest.mark.parametrize("capacity", [0, -1])
async def test_a_queue_without_room_is_refused(capacity):
    with pytest.raises(ValueError):
        FairBatchQueue(HeldModel().run, 4, 0.0, capacity=capacity)
