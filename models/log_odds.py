"""The log-odds of a score, for arrays: the one `logit` of the models and of the training scripts.

Scores are clipped to [eps, 1 - eps] first, so 0 and 1 map to finite values. `adaptation/` keeps its own scalar
`adaptation.labels.logit` (the same clip): it may import nothing of `models` (tests/test_layering.py), and a label's
stored `served_logit` is defined by it.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-6


def logit(p, eps: float = EPS) -> np.ndarray:
    """log(p / (1 - p)) of `p` clipped to [eps, 1 - eps], in `p`'s own float precision."""
    p = np.clip(p, eps, 1 - eps)
    return np.log(p / (1 - p))
