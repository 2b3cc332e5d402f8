"""Every HTTP workload of `make bench` is a request the public app accepts (checked in process, stub models),
so a long benchmark run never fails on a malformed body; the batch-text workload answers one result per text."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from support.api import Api, StubBackends, public_and_admin

from bench import service
from bench.inputs import PHONE_PHOTO_MB, SURE_TEXTS, TEXTS, phone_jpegs, photo_jpegs
from serve_app.services import Services


@pytest.fixture
def api(redis_url: str):
    backends = StubBackends()
    with TestClient(public_and_admin(Services.connect(redis_url, backends)), raise_server_exceptions=False) as client:
        api = Api(client, backends)
        api.seed()
        yield api


@pytest.mark.parametrize("workload", [
    service.text_workload("text", list(TEXTS)),
    service.text_workload("text_sure", list(SURE_TEXTS)),
    service.batch_text_workload("batch_text", list(TEXTS)),
    service.image_workload("image_default", "default", photo_jpegs()[:1]),
    service.image_workload("image_phone", "default", phone_jpegs()),
], ids=lambda w: w.name)  # fmt: skip
def test_each_workload_body_is_accepted(api, workload):
    key = api.new_key(profile=workload.profile)
    for body in workload.bodies:
        response = api.client.post(workload.path, headers=key, **body)
        assert response.status_code == 200, response.text
        if "texts" in body.get("json", {}):
            assert len(response.json()["results"]) == len(body["json"]["texts"]) == len(TEXTS)


def test_the_phone_photos_are_phone_sized():
    sizes = [len(jpeg) for jpeg in phone_jpegs()]
    assert [low * 1_000_000 <= size < high * 1_000_000 for size, (low, high) in zip(sizes, PHONE_PHOTO_MB)] == [True] * 4

