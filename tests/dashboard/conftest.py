"""The dashboard over a real redis-server: the admin listener's app beside the public app of tests/support/api.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.api import ADMIN_TOKEN, Api, StubBackends, seeded_api
from support.dashboard import log_in, make_user

from runtime.admin_server import create_admin_listener_app
from serve_app.services import Services


@pytest.fixture
def backends() -> StubBackends:
    return StubBackends()


@pytest.fixture
def api(redis_url: str, backends: StubBackends):
    """The public API (and the admin API) with stub models, to queue items and use keys."""
    with seeded_api(Services.connect(redis_url, backends, inference_timeout_s=2), backends) as api:
        yield api


@pytest.fixture
def key(api: Api) -> dict:
    return api.new_key()


@pytest.fixture
def client_from(redis_url):
    """Clients of fresh admin listener apps (over the same store) seen from the given client address: other
    browsers on other networks. Closed at the test's end."""
    opened = []

    def open_client(address: str, image_previews: bool = True) -> TestClient:
        app = create_admin_listener_app(Services.connect(redis_url, None), ADMIN_TOKEN, image_previews)
        opened.append(TestClient(app, client=(address, 50000)).__enter__())
        return opened[-1]

    yield open_client
    for each in opened:
        each.__exit__(None, None, None)


@pytest.fixture
def client(api, redis_url):
    """A client of the admin listener's app (admin API and dashboard) over the seeded store of `api`. One client per
    test: its store connections belong to its event loop; `cookies.clear()` makes it another browser."""
    with TestClient(create_admin_listener_app(Services.connect(redis_url, None), ADMIN_TOKEN)) as admin_client:
        yield admin_client


@pytest.fixture
def olga(client):
    """An operator, logged in on `client`."""
    make_user(client, "olga", "operator")
    assert log_in(client, "olga").status_code == 303
    return client
