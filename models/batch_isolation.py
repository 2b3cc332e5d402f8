"""One item never fails the batch it shares with other accounts' items.

A model deployment scores the requests of many callers in one batch (`@serve.batch`). If scoring raises, Serve hands
the same error to every caller of that batch: one odd text or image would turn every other tenant's answer into a
503. `scored_apart` scores the batch whole (the usual, fast path); when that raises, it scores each request alone, so
the failure stays with the request that causes it and the others get their scores. The result holds, per request,
its scores or its own exception, as a value: the deployment raises it for that caller only (`raised_if_failed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

log = logging.getLogger("moderation.models")
Request = TypeVar("Request")
Result = TypeVar("Result")


def scored_apart(
    score: Callable[[list[Request]], list[Result]], requests: Sequence[Request]
) -> list[Result | Exception]:
    """`score(requests)`, or, when it raises, each request scored alone: per request its result or its error."""
    try:
        return list(score(list(requests)))
    except Exception as exc:
        if len(requests) == 1:
            return [exc]
        # Only the error's type: its message may quote the content, which is never logged.
        log.warning("a batch of %d failed (%s); scoring its requests one by one", len(requests), type(exc).__name__)
    results: list[Result | Exception] = []
    for request in requests:
        try:
            [result] = score([request])
        except Exception as exc:
            result = exc
        results.append(result)
    return results


def raised_if_failed(result: Result | Exception) -> Result:
    """The request's own result, or its own error raised for its caller alone."""
    if isinstance(result, Exception):
        raise result
    return result
