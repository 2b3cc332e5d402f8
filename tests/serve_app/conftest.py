"""The FastAPI app against a real redis-server, with in-test model backends (tests/support/api.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.api import Api, public_and_admin, StubBackends

from serve_app.services import Services


@pytest.fixture
def backends() -> StubBackends:
    return StubBackends()


@pytest.fixture
def api(redis_url: str, backends: StubBackends):
    services = Services.connect(redis_url, backends, inference_timeout_s=2)
    with TestClient(public_and_admin(services), raise_server_exceptions=False) as client:
        api = Api(client, backends)
        api.seed()
        yield api


@pytest.fixture
def key(api: Api) -> dict:
    return api.new_key()
