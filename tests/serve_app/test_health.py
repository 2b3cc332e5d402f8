"""GET /healthz: no auth; 200 with the model versions once ready, 503 before."""

from __future__ import annotations

from support.api import assert_error


def test_healthz_needs_no_key_and_names_the_model_versions(api):
    response = api.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "models": {"image.nsfw": "stub-1", "text.toxic": "stub-text-1"}}


def test_healthz_is_503_while_a_model_is_not_ready(api, backends):
    backends.failing = True
    assert_error(api.client.get("/healthz"), 503, "inference_unavailable")


def test_unknown_path_and_method_use_the_error_shape(api):
    assert_error(api.client.get("/v2/moderate"), 404, "not_found")
    assert_error(api.client.get("/v1/moderate"), 405, "method_not_allowed")


def test_every_response_carries_one_request_id(api, key):
    response = api.moderate_text(key)
    assert len(response.headers.get_list("x-request-id")) == 1
    echoed = api.client.get("/healthz", headers={"X-Request-ID": "abc123"})
    assert echoed.headers.get_list("x-request-id") == []  # the proxy that set it answers it

