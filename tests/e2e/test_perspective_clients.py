"""Real Perspective clients' requests (tests/support/perspective_clients.py: each shape as its source sends it)
through the real Ray graph and models: Coral in each language it sends (analyze and its moderators' decisions),
Discourse with both of its models, Defender's default, OSMod through the discovery document, n8n with its
single-string `languages`; each gets a score for every attribute it asked for. One request per shape, benign
texts (only the presence of scores is asserted), and one clearly toxic French, German and Italian comment each
that must score at least 0.5 on TOXICITY. The same shapes against stub models:
tests/serve_app/test_perspective_clients.py."""

from __future__ import annotations

import pytest
from support.perspective_clients import (
    OSMOD_DEFAULT_ATTRIBUTES,
    PRODUCTION_ATTRIBUTES,
    UNSUPPORTED_ERROR_TYPE,
    Shape,
    coral_analyze,
    coral_suggest,
    defender,
    discourse,
    discovery_url,
    distinct_coral_languages,
    headers_for,
    join,
    n8n,
    osmod,
    query_for,
)

pytestmark = pytest.mark.e2e

TOXIC = {
    "fr": "Tu es un idiot pathétique, personne ne veut de toi ici, dégage.",
    "de": "Du bist ein erbärmlicher Idiot, niemand will dich hier, verschwinde.",
    "it": "Sei un idiota patetico, nessuno ti vuole qui, sparisci.",
}


@pytest.fixture(scope="module")
def key(new_key) -> str:
    return new_key(account="perspective-clients")["Authorization"].split()[1]


def send(client, shape: Shape, url: str, key: str):
    return client.request(shape.method, url, params=query_for(shape, key), headers=headers_for(shape, key),
                          content=shape.content())  # fmt: skip


def assert_scores(response, names, spans: bool = False) -> dict:
    assert response.status_code == 200, response.text
    scores = response.json()["attributeScores"]
    assert set(scores) == set(names)
    for name in names:
        assert scores[name]["summaryScore"]["type"] == "PROBABILITY"
        assert 0.0 <= scores[name]["summaryScore"]["value"] <= 1.0
        assert not spans or scores[name]["spanScores"]
    return scores


@pytest.mark.parametrize(("language", "locale"), sorted(distinct_coral_languages().items()))
def test_coral_analyze_and_suggestscore_in_each_language_it_sends(client, serve_graph, key, language, locale):
    endpoint = serve_graph["base_url"] + "/v1alpha1"  # Coral's "Custom endpoint" setting
    shape = coral_analyze(locale)
    assert_scores(send(client, shape, join(endpoint, "coral"), key), shape.asked)
    decision = coral_suggest(locale, "DELETED")
    answer = send(client, decision, join(endpoint, "coral", decision.operation), key)
    assert answer.status_code == 200, answer.text
    assert answer.json()["clientToken"] == decision.body["clientToken"]


def test_coral_with_the_host_alone_as_its_endpoint_and_severe_toxicity_as_its_model(client, serve_graph, key):
    shape = coral_analyze("fr-FR", model="SEVERE_TOXICITY")
    assert_scores(send(client, shape, join(serve_graph["base_url"], "coral"), key), ["SEVERE_TOXICITY"])


@pytest.mark.parametrize("model", ["standard", "severe toxicity (experimental)"])
def test_discourse_with_each_of_its_models(client, serve_graph, key, model):
    shape = discourse(model)
    assert_scores(send(client, shape, join(serve_graph["base_url"], "discourse"), key), shape.asked)


def test_defender_with_its_default_attribute(client, serve_graph, key):
    shape = defender()
    assert_scores(send(client, shape, join(serve_graph["base_url"], "defender"), key), ["SEVERE_TOXICITY"])


def test_osmod_through_the_discovery_document(client, serve_graph, key):
    document = client.get(discovery_url(serve_graph["base_url"], "osmod"))
    assert document.status_code == 200, document.text
    url = join(serve_graph["base_url"], "osmod", discovery=document.json())
    configured = osmod(PRODUCTION_ATTRIBUTES[:6], name="osmod-production")  # --attributes TOXICITY,SEVERE_TOXICITY,...
    assert_scores(send(client, configured, url, key), configured.asked, spans=True)
    default = osmod(OSMOD_DEFAULT_ATTRIBUTES, expect="refused")  # its create command's default: NYT attributes
    refused = send(client, default, url, key)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["details"][0]["errorType"] == UNSUPPORTED_ERROR_TYPE


def test_n8n_with_one_language_as_a_string(client, serve_graph, key):
    shape = n8n(language="it")
    response = send(client, shape, join(serve_graph["base_url"], "n8n"), key)
    assert_scores(response, shape.asked)
    assert response.json()["languages"] == ["it"]


@pytest.mark.parametrize("language", sorted(TOXIC))
def test_a_clearly_toxic_comment_scores_at_least_half_on_toxicity(client, serve_graph, key, language):
    shape = coral_analyze({"fr": "fr-FR", "de": "de", "it": "it-IT"}[language], text=TOXIC[language])
    body = {**shape.body, "languages": [language]}  # as n8n and scripts name it (Coral sends en for it-IT)
    response = client.post(join(serve_graph["base_url"] + "/v1alpha1", "coral"), params={"key": key}, json=body)
    scores = assert_scores(response, ["TOXICITY"])
    assert scores["TOXICITY"]["summaryScore"]["value"] >= 0.5, scores
