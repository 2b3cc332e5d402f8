"""The FastAPI apps against a real redis-server, with in-test model backends (tests/support/api.py): the fixtures
of tests/serve_app/ and tests/admin/, whose conftests import them."""

from __future__ import annotations

import pytest
from support.api import Api, StubBackends, seeded_api

from serve_app.services import Services


@pytest.fixture
def backends() -> StubBackends:
    return StubBackends()


@pytest.fixture
def api(redis_url: str, backends: StubBackends):
    services = Services.connect(redis_url, backends, inference_timeout_s=2)
    with seeded_api(services, backends) as api:
        yield api


@pytest.fixture
def key(api: Api) -> dict:
    return api.new_key()
