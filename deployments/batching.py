"""Batch size and wait of a model deployment, from its `user_config` (tunable without a redeploy).

serve_config.yaml:

    user_config:
      max_batch_size: 8            # 1..256, and never above the deployment's max_ongoing_requests
      batch_wait_timeout_s: 0      # 0..1 s: how long a request on an idle model waits for company
      models: {...}

Changing only these and re-applying the config makes Serve call `reconfigure()` on the running
replicas, which set them on the replica's batch queue (models/batch_queue.py: `set_max_batch_size` /
`set_batch_wait_timeout_s`): no replica restarts. Left out, the deployment's defaults apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_BATCH_SIZE_LIMIT = 256
MAX_BATCH_WAIT_S = 1.0


@dataclass(frozen=True)
class BatchSettings:
    max_batch_size: int
    batch_wait_timeout_s: float

    @classmethod
    def from_user_config(
        cls, user_config: dict | None, default: BatchSettings, max_ongoing_requests: int | None = None
    ) -> BatchSettings:
        """The settings of `user_config` (else `default`); ValueError when they are nonsense."""
        user_config = user_config or {}
        size = _number(user_config, "max_batch_size", default.max_batch_size, int)
        wait = _number(user_config, "batch_wait_timeout_s", default.batch_wait_timeout_s, float)
        if not 1 <= size <= MAX_BATCH_SIZE_LIMIT:
            raise ValueError(f"user_config.max_batch_size must be in 1..{MAX_BATCH_SIZE_LIMIT}, not {size}")
        if not 0.0 <= wait <= MAX_BATCH_WAIT_S:  # also refuses NaN
            raise ValueError(f"user_config.batch_wait_timeout_s must be in 0..{MAX_BATCH_WAIT_S} s, not {wait}")
        if max_ongoing_requests is not None and size > max_ongoing_requests:
            raise ValueError(
                f"user_config.max_batch_size ({size}) is above max_ongoing_requests ({max_ongoing_requests}): "
                "a replica would never be sent enough requests to fill a batch"
            )
        return cls(max_batch_size=size, batch_wait_timeout_s=wait)

    def apply_to(self, batched_method: Any) -> None:
        """Set these on a batch queue (models/batch_queue.py; a `@serve.batch` method has the same setters): the next
        batch uses them."""
        batched_method.set_max_batch_size(self.max_batch_size)
        batched_method.set_batch_wait_timeout_s(self.batch_wait_timeout_s)


def _number(user_config: dict, name: str, default: Any, kind: type) -> Any:
    value = user_config.get(name, default)
    # bool is an int to Python, and a float batch size would be silently truncated.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise ValueError(f"user_config.{name} must be a {'whole number' if kind is int else 'number'}, not {value!r}")
    return kind(value)


def replica_max_ongoing_requests() -> int | None:
    """max_ongoing_requests of the replica this runs in; None outside a Serve replica."""
    from ray import serve

    try:
        return serve.get_replica_context()._deployment_config.max_ongoing_requests
    except Exception:  # not in a replica (unit tests), or Serve's private field moved
        return None
