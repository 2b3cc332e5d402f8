"""The processes a test started, found by their session (each started with start_new_session=True)."""

from __future__ import annotations

import os
import time


def processes_of_session(session_id: int, settle_s: float = 15) -> list[str]:
    """The live processes of the session, once it has had `settle_s` to wind down.

    Zombies (exited, not yet reaped by init: state Z, empty command line) do not count; a process that is still
    running after `settle_s` does.
    """
    deadline = time.monotonic() + settle_s
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.getsid(int(pid)) == session_id:
                    state = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
                    if state != "Z":
                        found.append(open(f"/proc/{pid}/cmdline").read().replace("\0", " ")[:80])
            except (ProcessLookupError, FileNotFoundError, PermissionError):
                pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)
