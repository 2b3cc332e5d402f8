"""A model deployment whose queue is full answers 503 `overloaded`, not `inference_unavailable`."""

from __future__ import annotations

import pytest
from ray.serve.exceptions import BackPressureError

from deployments.handles import _unless_full
from moderation.errors import Overloaded
from serve_app.errors import api_error_of


async def _full():
    raise BackPressureError(num_queued_requests=64, max_queued_requests=64)


@pytest.mark.anyio
async def test_back_pressure_is_overloaded_with_retry_after():
    with pytest.raises(Overloaded) as caught:
        await _unless_full(_full(), "image")
    error = api_error_of(caught.value)
    assert (error.status, error.code) == (503, "overloaded")
    assert error.headers() == {"Retry-After": "1"}
