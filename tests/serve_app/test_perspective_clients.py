"""Real Perspective clients' requests, exactly as their source sends them (tests/support/perspective_clients.py),
against the in-process app with stub models: each answers with a score for every attribute it asked for, keyed by
the name it sent, in every language Perspective served; attributes with no model are refused in Google's own body
(or dropped with dropUnsupportedAttributes); both path forms, alt=json, a single-string `languages`, n8n's
lower-case scoreType; and CORS for browser clients, only for the origins the operator allows. The same clients
through the real graph and models: tests/e2e/test_perspective_clients.py. The route's own rules:
test_perspective_compat.py."""

from __future__ import annotations

import inspect

import pytest
from support.api import seeded_api
from support.perspective_clients import (
    ALIASES,
    ANALYZE,
    BENIGN,
    BROWSER_ORIGIN,
    CORS_ORIGINS_SETTING,
    ERROR_DETAIL_TYPE,
    PERSPECTIVE_LANGUAGES,
    PRODUCTION_ATTRIBUTES,
    SHAPES,
    SUGGEST,
    UNSUPPORTED_ATTRIBUTES,
    UNSUPPORTED_DETAIL,
    UNSUPPORTED_ERROR_TYPE,
    Shape,
    browser,
    cors_setting_value,
    discovery_url,
    headers_for,
    join,
    perspective_py,
    query_for,
    unsupported_message,
)

from moderation.compat_mapping import language_code
from runtime.settings import get_settings
from serve_app.services import Services

BASE = "http://testserver"  # the TestClient's address: what an operator puts in the client's setting
OTHER_ORIGIN = "https://elsewhere.example"


def secret(headers: dict) -> str:
    return headers["Authorization"].split()[1]


def usage(api, account: str = "acme") -> int:
    return api.client.get(f"/admin/v1/accounts/{account}/usage", headers=api.admin).json()["used"]


def url_of(api, shape: Shape, base: str = BASE) -> str:
    """The URL the client posts to: Coral's endpoint setting is the base with Perspective's version; a client built
    from the discovery document reads this service's document first, as it does."""
    if shape.client == "coral":
        return join(base + "/v1alpha1", "coral", shape.operation)
    if shape.client in ("osmod", "npm", "googleapiclient", "perspective.py"):
        document = api.client.get(discovery_url(base, shape.client))
        assert document.status_code == 200, document.text
        return join(base, shape.client, shape.operation, discovery=document.json())
    return join(base, shape.client, shape.operation)


def send(api, shape: Shape, key: str, url: str | None = None, **headers):
    return api.client.request(shape.method, url or url_of(api, shape), params=query_for(shape, key),
                              headers={**headers_for(shape, key), **headers}, content=shape.content())  # fmt: skip


def requested_languages(shape: Shape) -> list[str]:
    languages = shape.body.get("languages", [])
    return [languages] if isinstance(languages, str) else list(languages)


def assert_scores(response, names, spans: bool = False) -> dict:
    """200, and a PROBABILITY score in 0..1 for every name asked, keyed by that name and by no other."""
    assert response.status_code == 200, response.text
    scores = response.json()["attributeScores"]
    assert set(scores) == set(names)
    for name in names:
        summary = scores[name]["summaryScore"]
        assert summary["type"] == "PROBABILITY" and 0.0 <= summary["value"] <= 1.0, (name, summary)
        if spans:
            assert scores[name]["spanScores"], name
    return scores


def assert_unsupported(response, attribute: str, languages: list[str]) -> None:
    """Google's refusal of an attribute: exactly its envelope, its detail type and the attribute as sent."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message", "status", "details"}
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["message"] == unsupported_message(attribute, languages)
    [detail] = error["details"]
    assert (detail["@type"], detail["errorType"]) == (ERROR_DETAIL_TYPE, UNSUPPORTED_ERROR_TYPE)
    assert detail[UNSUPPORTED_DETAIL]["attribute"] == attribute
    assert isinstance(detail[UNSUPPORTED_DETAIL]["detectedLanguages"], list)


def first_unserved(shape: Shape) -> str:
    return next(name for name in shape.asked if name not in PRODUCTION_ATTRIBUTES)


# --- How each client joins its base URL (no app) ---------------------------------------------------------------------


@pytest.mark.parametrize(("endpoint", "path"), [
    ("http://moderation.internal:8000/v1alpha1", "/v1alpha1/comments:analyze"),  # Coral's default form
    ("http://moderation.internal:8000/v1alpha1/", "/v1alpha1/comments:analyze"),
    ("http://moderation.internal:8000", "/comments:analyze"),  # the host alone: Coral appends the method only
    ("http://moderation.internal:8000/", "/comments:analyze"),
    ("https://example.org/moderation/v1alpha1", "/moderation/v1alpha1/comments:analyze"),  # behind a path prefix
])  # fmt: skip
def test_coral_joins_its_endpoint_setting_with_nodes_path_join(endpoint, path):
    assert join(endpoint, "coral").endswith(path) and join(endpoint, "coral").count("//") == 1
    assert join(endpoint, "coral", SUGGEST) == join(endpoint, "coral")[: -len(ANALYZE)] + SUGGEST


def test_the_other_clients_join_as_their_source_does():
    assert join("http://h:8000/ignored", "discourse") == "http://h:8000/v1alpha1/comments:analyze"  # Excon's path
    analyze = "http://h:8000/v1alpha1/comments:analyze"
    assert {join("http://h:8000", client) for client in ("defender", "n8n", "browser")} == {analyze}
    for client in ("osmod", "npm", "googleapiclient", "perspective.py"):
        assert discovery_url("http://h:8000/", client) == "http://h:8000/$discovery/rest?version=v1alpha1"
        assert join("http://h:8000", client) == "http://h:8000/v1alpha1/comments:analyze"
    with pytest.raises(ValueError):
        discovery_url("http://h", "coral")


# --- Every client's shapes through the app ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
def test_every_client_shape_is_answered_as_perspective_answered_it(api, key, backends, shape):
    response = send(api, shape, secret(key))
    if shape.expect == "recorded":
        assert response.status_code == 200, response.text
        assert response.json() == {"clientToken": shape.body["clientToken"],
                                   "requestedLanguages": requested_languages(shape)}  # fmt: skip
        return
    if shape.expect == "refused":
        languages = [language_code(tag) for tag in requested_languages(shape)] or ["en"]  # else the detected one
        assert_unsupported(response, first_unserved(shape), languages)
        assert usage(api) == 0
        return
    assert_scores(response, shape.asked, spans=shape.body.get("spanAnnotations") is True)
    answer = response.json()
    if requested_languages(shape):
        assert answer["languages"] == [language_code(tag) for tag in requested_languages(shape)]
    if "clientToken" in shape.body:
        assert answer["clientToken"] == shape.body["clientToken"]
    assert usage(api) == (2 if shape.body.get("spanAnnotations") is True else 1)


@pytest.mark.parametrize("language", PERSPECTIVE_LANGUAGES)
def test_no_production_attribute_is_refused_in_any_perspective_language(api, key, language):
    body = {"comment": {"text": BENIGN.get(language, BENIGN["en"])}, "languages": [language],
            "requestedAttributes": {name: {} for name in PRODUCTION_ATTRIBUTES}}  # fmt: skip
    response = api.client.post(join(BASE, "defender"), params={"key": secret(key)}, json=body)
    assert_scores(response, PRODUCTION_ATTRIBUTES)
    assert response.json()["languages"] == [language_code(language)]


@pytest.mark.parametrize("languages", [["fr-FR"], ["pt-BR"], ["zh-Hant"], ["EN"], ["de", "en"], ["xx"], []])
def test_language_tags_of_any_form_refuse_nothing(api, key, languages):
    body = {"comment": {"text": BENIGN["en"]}, "languages": languages,
            "requestedAttributes": {name: {} for name in PRODUCTION_ATTRIBUTES}}  # fmt: skip
    response = api.client.post(join(BASE, "defender"), params={"key": secret(key)}, json=body)
    assert_scores(response, PRODUCTION_ATTRIBUTES)


def test_experimental_and_versioned_names_are_answered_under_the_name_sent(api, key, backends):
    backends.toxic = 0.7
    backends.text_scores.update(insult=0.6, identity_attack=0.3, threat=0.2, profanity=0.4)
    names = [*ALIASES, *sorted(set(ALIASES.values()))]
    body = {"comment": {"text": BENIGN["en"]}, "requestedAttributes": {name: {} for name in names}}
    scores = assert_scores(api.client.post(join(BASE, "defender"), params={"key": secret(key)}, json=body), names)
    for alias, attribute in ALIASES.items():  # the same score as the attribute it means
        assert scores[alias]["summaryScore"]["value"] == pytest.approx(scores[attribute]["summaryScore"]["value"])


@pytest.mark.parametrize("attribute", UNSUPPORTED_ATTRIBUTES)
def test_an_attribute_without_a_model_is_refused_in_googles_body_unless_dropped(api, key, attribute):
    body = {"comment": {"text": BENIGN["fr"]}, "languages": ["fr"],
            "requestedAttributes": {attribute: {}, "TOXICITY": {}}}  # fmt: skip
    response = api.client.post(join(BASE, "defender"), params={"key": secret(key)}, json=body)
    assert_unsupported(response, attribute, ["fr"])
    assert usage(api) == 0
    dropped = api.client.post(join(BASE, "defender"), params={"key": secret(key)},
                              json={**body, "dropUnsupportedAttributes": True})  # fmt: skip
    assert_scores(dropped, ["TOXICITY"])


@pytest.mark.parametrize("path", ["/v1alpha1/comments:analyze", "/comments:analyze"])
def test_alt_json_is_served_and_another_alt_refused_in_googles_envelope(api, key, path):
    body = {"comment": {"text": BENIGN["en"]}, "requestedAttributes": {"TOXICITY": {}}}
    assert_scores(api.client.post(path, params={"key": secret(key), "alt": "json"}, json=body), ["TOXICITY"])
    refused = api.client.post(path, params={"key": secret(key), "alt": "proto"}, json=body)
    assert refused.status_code == 400, refused.text
    assert (refused.json()["error"]["code"], refused.json()["error"]["status"]) == (400, "INVALID_ARGUMENT")


def test_both_path_forms_serve_both_methods_and_answer_errors_in_googles_envelope(api, key):
    analyze = {"comment": {"text": BENIGN["en"]}, "requestedAttributes": {"TOXICITY": {}}}
    suggest = {"comment": {"text": BENIGN["en"]}, "clientToken": "t-9",
               "attributeScores": {"TOXICITY": {"summaryScore": {"value": 0}}}}  # fmt: skip
    for prefix in ("/v1alpha1", ""):
        assert_scores(api.client.post(f"{prefix}/comments:analyze", params={"key": secret(key)}, json=analyze),
                      ["TOXICITY"])  # fmt: skip
        answer = api.client.post(f"{prefix}/comments:suggestscore", params={"key": secret(key)}, json=suggest)
        assert answer.status_code == 200 and answer.json()["clientToken"] == "t-9", answer.text
        empty = api.client.post(f"{prefix}/comments:analyze", params={"key": secret(key)},
                                json={**analyze, "comment": {"text": " "}})  # fmt: skip
        assert empty.status_code == 400
        assert empty.json()["error"]["details"][0]["errorType"] == "COMMENT_EMPTY"


def test_languages_may_be_one_string_as_n8n_sends_it(api, key):
    body = {"comment": {"text": BENIGN["it"]}, "languages": "it", "requestedAttributes": {"TOXICITY": {}}}
    response = api.client.post(join(BASE, "n8n"), headers={"Authorization": f"Bearer {secret(key)}"}, json=body)
    assert_scores(response, ["TOXICITY"])
    assert response.json()["languages"] == ["it"]
    suggestion = {"comment": {"text": "x"}, "languages": "it",
                  "attributeScores": {"TOXICITY": {"summaryScore": {"value": 0}}}}  # fmt: skip
    answer = api.client.post("/v1alpha1/comments:suggestscore", params={"key": secret(key)}, json=suggestion)
    assert answer.status_code == 200 and answer.json()["requestedLanguages"] == ["it"], answer.text


def test_n8ns_lower_case_score_type_is_perspectives_probability(api, key):
    body = {"comment": {"text": BENIGN["en"]},
            "requestedAttributes": {"TOXICITY": {"scoreType": "probability", "scoreThreshold": 0}}}  # fmt: skip
    assert_scores(api.client.post(join(BASE, "n8n"), headers={"Authorization": f"Bearer {secret(key)}"}, json=body),
                  ["TOXICITY"])  # fmt: skip


def test_googleapiclient_gets_every_production_attribute_in_french(api, key):
    from googleapiclient import discovery

    class Through:  # httplib2's interface over the in-process app
        def request(self, uri, method="GET", body=None, headers=None, **_):
            import httplib2

            response = api.client.request(method, uri, content=body, headers=headers)
            return httplib2.Response({"status": response.status_code, **response.headers}), response.content

    service = discovery.build("commentanalyzer", "v1alpha1", http=Through(), developerKey=secret(key),
                              discoveryServiceUrl=discovery_url(BASE, "googleapiclient"), static_discovery=False)
    body = {"comment": {"text": BENIGN["fr"]}, "languages": ["fr"],
            "requestedAttributes": {name: {} for name in PRODUCTION_ATTRIBUTES}}  # fmt: skip
    answer = service.comments().analyze(body=body).execute()  # ?key=...&alt=json
    assert set(answer["attributeScores"]) == set(PRODUCTION_ATTRIBUTES) and answer["languages"] == ["fr"]


def test_perspective_py_finds_the_span_score_it_reads(api, key):
    # Google answered spanScores (one span, the whole text) without spanAnnotations; perspective.py reads spanScores[0].
    shape = perspective_py()
    scores = assert_scores(send(api, shape, secret(key)), shape.asked)
    for name in shape.asked:
        assert scores[name]["spanScores"][0]["score"]["value"] == pytest.approx(scores[name]["summaryScore"]["value"])


# --- CORS for browser clients ----------------------------------------------------------------------------------------


@pytest.fixture
def cors_api(redis_url, backends, monkeypatch):
    """The app with BROWSER_ORIGIN allowed for the Perspective routes: in the setting, and passed to
    Services.connect when it takes the setting's field."""
    monkeypatch.setenv(CORS_ORIGINS_SETTING, cors_setting_value([BROWSER_ORIGIN]))
    get_settings.cache_clear()
    field = CORS_ORIGINS_SETTING.removeprefix("MODERATION_").lower()
    extra = {field: [BROWSER_ORIGIN]} if field in inspect.signature(Services.connect).parameters else {}
    with seeded_api(Services.connect(redis_url, backends, inference_timeout_s=2, **extra), backends) as api:
        yield api
    get_settings.cache_clear()


@pytest.fixture
def cors_key(cors_api) -> str:
    """A key whose page origins (the widget's list, which the operator may use for the Perspective routes too)
    hold BROWSER_ORIGIN."""
    body = {"account": "acme", "profile": "default", "plan": "default"}
    created = cors_api.client.post("/admin/v1/keys", json=body, headers=cors_api.admin).json()
    allowed = cors_api.client.put(f"/admin/v1/keys/{created['id']}/widget", json={"origins": [BROWSER_ORIGIN]},
                                  headers=cors_api.admin)  # fmt: skip
    assert allowed.status_code == 200, allowed.text
    return created["key"]


PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


@pytest.mark.parametrize("path", ["/v1alpha1/comments:analyze", "/comments:analyze", "/v1alpha1/comments:suggestscore"])
def test_a_preflight_is_answered_for_an_allowed_origin_only(cors_api, cors_key, path):
    allowed = cors_api.client.options(path, headers={"Origin": BROWSER_ORIGIN, **PREFLIGHT})
    assert allowed.status_code in (200, 204), allowed.text
    assert allowed.headers["access-control-allow-origin"] == BROWSER_ORIGIN
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "content-type" in allowed.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-credentials" not in allowed.headers
    refused = cors_api.client.options(path, headers={"Origin": OTHER_ORIGIN, **PREFLIGHT})
    assert "access-control-allow-origin" not in refused.headers


def test_a_browser_clients_call_is_readable_from_an_allowed_origin_only(cors_api, cors_key):
    shape = browser()
    allowed = send(cors_api, shape, cors_key)
    assert_scores(allowed, ["TOXICITY"])
    assert allowed.headers["access-control-allow-origin"] == BROWSER_ORIGIN
    other = send(cors_api, shape, cors_key, Origin=OTHER_ORIGIN)
    assert "access-control-allow-origin" not in other.headers


def test_the_native_routes_answer_no_browser_origin(cors_api, cors_key):
    headers = {"Authorization": f"Bearer {cors_key}", "Origin": BROWSER_ORIGIN}
    native = cors_api.client.post("/v1/moderate-text", json={"text": BENIGN["en"]}, headers=headers)
    assert native.status_code == 200, native.text
    assert "access-control-allow-origin" not in native.headers
