"""The second stage's compute thread yields the cores (deployments/threads.py): its nice value rises in that thread
alone, so the replica's other threads (Ray's health checks and calls) keep the default priority."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from deployments.threads import LOWEST_PRIORITY_NICE, SECOND_STAGE_NICE_STEP, lower_this_threads_priority


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_the_calling_thread_alone_is_lowered_relative_to_its_process_and_only_once():
    """Ray's workers run at nice 15: the step is relative to the process, so it still lowers the thread there."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    seen = {}

    def worker():
        lower_this_threads_priority()
        seen["first"] = os.getpriority(os.PRIO_PROCESS, 0)
        lower_this_threads_priority()  # idempotent: not another step
        lower_this_threads_priority(SECOND_STAGE_NICE_STEP - 5)  # never back up: that would need privileges
        seen["again"] = os.getpriority(os.PRIO_PROCESS, 0)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen["first"] == min(LOWEST_PRIORITY_NICE, before + SECOND_STAGE_NICE_STEP) > before
    assert seen["again"] == seen["first"]
    assert os.getpriority(os.PRIO_PROCESS, 0) == before  # this thread, like Ray's, keeps its own
