"""A model deployment whose queue is full answers 503 `overloaded`, not `inference_unavailable`; a call the ingress
gives up on is cancelled on the replica."""

from __future__ import annotations

import asyncio

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


class PendingResponse:
    """A DeploymentResponse that never answers, and records being cancelled."""

    def __init__(self):
        self.cancelled = False

    def __await__(self):
        return asyncio.get_running_loop().create_future().__await__()

    def cancel(self):
        self.cancelled = True


@pytest.mark.anyio
async def test_a_call_past_the_deadline_is_cancelled_on_the_replica():
    response = PendingResponse()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(_unless_full(response, "text"), timeout=0.05)
    assert response.cancelled
