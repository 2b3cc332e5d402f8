"""One compute thread per replica: the whole graph shares two cores.

The BLAS/OpenMP variables are also set for every replica in serve_config.yaml's
runtime_env (they must be set before a library starts its pool); torch's own pool
is set here because torch reads it at run time.

Every replica's compute thread runs at the priority Ray gives its worker (nice 15), the text cascade's second stage's
included: a lower one starved it under sustained load (deployments/gemma_model.py).
"""

from __future__ import annotations


def limit_compute_threads() -> None:
    import torch

    torch.set_num_threads(1)
