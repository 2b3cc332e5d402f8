"""The compatible APIs through the real Ray graph, called by the real clients: the `openai` SDK
(/v1/moderations) and `google-api-python-client` built from the discovery document (Perspective);
plus the native batch. Real models: the assertions use texts far from every threshold."""

from __future__ import annotations

import base64
import json

import openai
import pytest
from googleapiclient import discovery, errors
from support.api import photo_bytes

from runtime.cli import main as admin_cli

pytestmark = pytest.mark.e2e
ABUSE = "You are a worthless idiot and everyone hates you."
KIND = "Thank you for the lovely photos of the garden."


@pytest.fixture(scope="module")
def account_key(new_key):
    return new_key(account="compat")["Authorization"].split()[1]


@pytest.fixture(scope="module")
def sdk(serve_graph, account_key):
    return openai.OpenAI(api_key=account_key, base_url=serve_graph["base_url"] + "/v1", max_retries=0, timeout=60)


def used(admin_client) -> int:
    return admin_client.get("/admin/v1/accounts/compat/usage").json()["used"]


def test_openai_sdk_single_and_batch(sdk, admin_client):
    before = used(admin_client)
    single = sdk.moderations.create(input=ABUSE)
    assert single.model == "omni-moderation-latest" and single.id.startswith("modr-")
    [result] = single.results
    assert result.flagged and result.categories.harassment and result.category_scores.harassment > 0.5
    assert result.category_scores.self_harm == 0.0 and result.category_applied_input_types.harassment == ["text"]
    batch = sdk.moderations.create(input=[ABUSE, KIND, KIND], model="text-moderation-latest")
    assert batch.model == "text-moderation-latest" and [r.flagged for r in batch.results] == [True, False, False]
    assert used(admin_client) == before + 4


def test_openai_sdk_multimodal_item_with_a_data_url(sdk):
    url = "data:image/jpeg;base64," + base64.b64encode(photo_bytes()).decode()
    answer = sdk.moderations.create(input=[{"type": "text", "text": KIND}, {"type": "image_url", "image_url": {"url": url}}])
    [result] = answer.results
    assert not result.flagged and 0.0 < result.category_scores.sexual < 0.5
    assert result.category_applied_input_types.sexual == ["image"]


def test_openai_sdk_parses_the_errors(sdk):
    with pytest.raises(openai.BadRequestError) as unknown:
        sdk.moderations.create(input="x", model="gpt-9")
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as fetched:
        sdk.moderations.create(input=[{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}])
    assert "data:" in fetched.value.message
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key="mod_wrong", base_url=str(sdk.base_url), max_retries=0).moderations.create(input="x")


def test_googleapiclient_analyze_and_suggestscore_through_the_discovery_document(serve_graph, account_key, admin, monkeypatch, capsys):
    service = discovery.build(
        "commentanalyzer", "v1alpha1", developerKey=account_key, static_discovery=False,
        discoveryServiceUrl=serve_graph["base_url"] + "/$discovery/rest?version={apiVersion}",
    )  # fmt: skip
    body = {"comment": {"text": f"{KIND} {ABUSE}"}, "requestedAttributes": {"TOXICITY": {}, "INSULT": {}},
            "languages": ["en"], "spanAnnotations": True, "clientToken": "bot-1"}  # fmt: skip
    answer = service.comments().analyze(body=body).execute()
    toxicity = answer["attributeScores"]["TOXICITY"]
    assert toxicity["summaryScore"]["type"] == "PROBABILITY" and toxicity["summaryScore"]["value"] > 0.5
    kind_span, abuse_span = toxicity["spanScores"]
    assert kind_span["score"]["value"] < 0.5 < abuse_span["score"]["value"]
    assert answer["clientToken"] == "bot-1" and answer["languages"] == ["en"]
    assert answer["detectedLanguages"][:1] == ["en"]

    with pytest.raises(errors.HttpError) as refused:
        service.comments().analyze(body={"comment": {"text": "x"}, "requestedAttributes": {"SPAM": {}}}).execute()
    assert refused.value.error_details[0]["errorType"] == "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE"
    assert refused.value.error_details[0]["languageNotSupportedByAttributeError"]["attribute"] == "SPAM"

    suggestion = {"comment": {"text": ABUSE}, "clientToken": "coral-7",
                  "attributeScores": {"TOXICITY": {"summaryScore": {"value": 1.0}}}}  # fmt: skip
    assert service.comments().suggestscore(body=suggestion).execute()["clientToken"] == "coral-7"
    monkeypatch.setenv("MODERATION_ADMIN_TOKEN", admin["Authorization"].split()[1])
    assert admin_cli(["--url", serve_graph["admin_url"], "feedback", "compat"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["items"]
    assert (entry["attribute"], entry["score"], entry["client_token"]) == ("TOXICITY", 1.0, "coral-7")


def test_native_batch_through_the_graph(client, new_key):
    headers = new_key(account="compat-batch")
    response = client.post("/v1/moderate-text", headers=headers, json={"texts": [ABUSE, KIND] * 10})
    assert response.status_code == 200, response.text
    decisions = [r["decision"] for r in response.json()["results"]]
    assert decisions[1::2] == ["allow"] * 10 and "allow" not in decisions[0::2]
