"""The batch queue (models/batch_queue.py): the next batch forms when the model is free, so batches fill under load;
a lone request runs at once; a caller that gave up is dropped; a failing run fails only its own batch."""

from __future__ import annotations

import asyncio
import time

import pytest

from models.batch_queue import BatchQueue

pytestmark = pytest.mark.anyio


class SlowModel:
    """Takes `run_s` a batch (as a model's thread would), recording each batch's items."""

    def __init__(self, run_s: float = 0.05, fail_on: object = None) -> None:
        self.run_s, self.fail_on = run_s, fail_on
        self.batches: list[list[int]] = []

    async def run(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        await asyncio.sleep(self.run_s)
        if self.fail_on in items:
            raise RuntimeError("the model failed")
        return [item * 10 for item in items]


async def test_requests_that_arrive_while_a_batch_runs_form_the_next_batch_together():
    model = SlowModel()
    queue = BatchQueue(model.run, max_batch_size=8, batch_wait_timeout_s=0.0)
    first = asyncio.ensure_future(queue.submit(0))
    await asyncio.sleep(0.01)  # the first batch (of one) is running
    later = [asyncio.ensure_future(queue.submit(n)) for n in range(1, 7)]
    assert await asyncio.gather(first, *later) == [0, 10, 20, 30, 40, 50, 60]
    # @serve.batch would have made six batches of one here, each queued behind the running one.
    assert model.batches == [[0], [1, 2, 3, 4, 5, 6]]


async def test_a_batch_holds_at_most_max_batch_size_and_the_rest_go_next_in_order():
    model = SlowModel(run_s=0.01)
    queue = BatchQueue(model.run, max_batch_size=3, batch_wait_timeout_s=0.0)
    answers = await asyncio.gather(*(queue.submit(n) for n in range(7)))
    assert answers == [n * 10 for n in range(7)]
    assert model.batches == [[0, 1, 2], [3, 4, 5], [6]]


async def test_a_lone_request_on_an_idle_model_runs_without_waiting():
    model = SlowModel(run_s=0.0)
    queue = BatchQueue(model.run, max_batch_size=8, batch_wait_timeout_s=0.0)
    await queue.submit(1)  # the worker is started
    started = time.perf_counter()
    assert await queue.submit(2) == 20
    assert time.perf_counter() - started < 0.1  # a polling worker would take its poll interval; a busy machine, a few ms


async def test_with_a_wait_an_idle_model_waits_for_company_but_never_past_a_full_batch():
    model = SlowModel(run_s=0.0)
    queue = BatchQueue(model.run, max_batch_size=3, batch_wait_timeout_s=0.2)
    first = asyncio.ensure_future(queue.submit(1))
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    await asyncio.gather(first, queue.submit(2), queue.submit(3))
    assert model.batches == [[1, 2, 3]]
    assert time.perf_counter() - started < 0.15  # full: it ran before the wait was over


async def test_a_caller_that_gave_up_while_waiting_is_dropped_from_its_batch():
    model = SlowModel()
    queue = BatchQueue(model.run, max_batch_size=8, batch_wait_timeout_s=0.0)
    running = asyncio.ensure_future(queue.submit(0))
    await asyncio.sleep(0.01)
    given_up = asyncio.ensure_future(queue.submit(1))
    kept = asyncio.ensure_future(queue.submit(2))
    await asyncio.sleep(0)
    given_up.cancel()
    assert await running == 0 and await kept == 20
    assert model.batches == [[0], [2]]


async def test_a_failing_run_fails_its_own_batch_only_and_the_queue_goes_on():
    model = SlowModel(run_s=0.01, fail_on=5)
    queue = BatchQueue(model.run, max_batch_size=2, batch_wait_timeout_s=0.0)
    answers = await asyncio.gather(*(queue.submit(n) for n in (4, 5, 6)), return_exceptions=True)
    assert isinstance(answers[0], RuntimeError) and isinstance(answers[1], RuntimeError)
    assert answers[2] == 60
    assert await queue.submit(7) == 70


async def test_a_run_that_answers_the_wrong_number_of_results_fails_its_callers():
    async def short(items: list[int]) -> list[int]:
        return items[:-1]

    queue = BatchQueue(short, max_batch_size=4, batch_wait_timeout_s=0.0)
    with pytest.raises(RuntimeError, match="answered"):
        await asyncio.gather(queue.submit(1), queue.submit(2))


@pytest.mark.parametrize("size, wait", [(0, 0.0), (1, -0.1), (1, float("nan"))])
async def test_nonsense_settings_are_refused(size, wait):
    with pytest.raises(ValueError):
        BatchQueue(SlowModel().run, max_batch_size=size, batch_wait_timeout_s=wait)
