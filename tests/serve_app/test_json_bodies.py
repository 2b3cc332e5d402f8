"""JSON bodies bounded before and while they are parsed: the shape caps (serve_app.json_shape), the body limit by
route and plan scope (/v1/moderations), and large bodies parsed off the event loop (serve_app.bodies)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from starlette.requests import Request
from support.api import assert_error

from policy.types import Plan
from serve_app import bodies
from serve_app.bodies import PARSE_OFF_LOOP_BYTES, json_bytes_for, read_json
from serve_app.json_shape import MAX_JSON_DEPTH, MAX_JSON_STRINGS, MAX_JSON_TOKENS, JsonTooComplex, check_json_shape
from serve_app.routes_openai import body_limit

MIB = 1024 * 1024
NESTED_EMPTY_ARRAYS = b"[" + b"[]," * 4_700_000 + b"[]]"  # the issue's 14 MB: 1.8 s of json.loads, holding the GIL


def test_the_issues_14_mb_of_empty_arrays_is_refused_before_any_parse_quickly():
    started = time.perf_counter()
    with pytest.raises(JsonTooComplex, match="arrays, objects and values"):
        check_json_shape(NESTED_EMPTY_ARRAYS)
    assert time.perf_counter() - started < 0.6  # measured 0.1 s; json.loads alone takes 1.8 s


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"[" + b"0," * MAX_JSON_TOKENS + b"0]", "arrays, objects and values"),
        (b"[" + b'"",' * MAX_JSON_STRINGS + b'""]', "strings"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "deeper than"),
        (b'{"input": ' + b"[" * 20_000 + b"]" * 20_000 + b"}", "arrays, objects and values"),
    ],
    ids=["values", "strings", "depth", "deep"],
)
def test_a_body_over_a_cap_is_refused(body, match):
    with pytest.raises(JsonTooComplex, match=match):
        check_json_shape(body)


def test_brackets_commas_and_escaped_quotes_inside_texts_do_not_count():
    texts = ['[{"a": [1, 2]}], \\"quoted\\" {x: y}' * 300] * 100  # 100 texts, each with thousands of tokens
    body = json.dumps({"input": texts}).encode()
    assert sum(body.count(token) for token in b"[]{},:") > 10 * MAX_JSON_TOKENS
    check_json_shape(body)  # the whole body is within the caps: the tokens are inside strings


def test_a_utf16_body_that_would_hide_its_arrays_in_a_string_is_refused_at_once():
    # In UTF-16 an escaped quote is no `\"` byte pair: read as UTF-8 bytes, the arrays look like they are in a string.
    body = '{"input": ["\\"", '.encode("utf-16-le") + "[],".encode("utf-16-le") * 1_000_000 + '"x"]}'.encode("utf-16-le")
    check_json_shape(body)  # the byte scan is fooled ...
    started = time.perf_counter()
    with pytest.raises(Exception, match="must be JSON") as refused:
        bodies.json_object(body, "{}")  # ... but the body is parsed as UTF-8 only: refused at its first byte
    refused_s = time.perf_counter() - started
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")
    started = time.perf_counter()
    json.loads(body)  # what a parser that detected UTF-16 would do: a million arrays (0.5 s on an idle core)
    assert refused_s < (time.perf_counter() - started) / 3  # relative: a busy machine slows both alike


def test_the_deepest_body_of_the_api_is_within_the_caps():
    check_json_shape(json.dumps({"input": [{"type": "image_url", "image_url": {"url": "data:,"}}] * 100}).encode())


def test_a_text_only_plans_moderations_body_has_no_room_for_an_image():
    limits = {"text_max_chars": 20_000, "image_max_bytes": 10 * MIB, "monthly_quota": 1, "rate_per_second": 1,
              "burst": 1}  # fmt: skip
    text_only, both, images_only = (Plan(name=scope, scope=scope, **limits) for scope in ("text", "both", "images"))
    assert body_limit(text_only) == json_bytes_for(200_000) < 1.3e6  # 14 MB before
    assert body_limit(both) == json_bytes_for(200_000) + 10 * MIB * 4 // 3 + 4
    assert body_limit(images_only) == json_bytes_for(0) + 10 * MIB * 4 // 3 + 4


def test_a_text_only_key_sending_an_image_sized_body_is_413_before_it_is_parsed(api):
    key = api.new_key(plan="text-only")
    # Within the 14 MB a text-only plan was given before (and answered 200: the padding is no text), over its 1.3 MB.
    body = b'{"input": "hi", "padding": "' + b"a" * (2 * MIB) + b'"}'
    response = api.client.post("/v1/moderations", headers={**key, "Content-Type": "application/json"}, content=body)
    assert response.status_code == 413 and response.json()["error"]["code"] == "text_too_long"


@pytest.mark.parametrize("route", ["/v1/moderations", "/v1/moderate-text"])
def test_nested_arrays_are_400_invalid_request_on_every_json_route(api, key, route):
    body = b'{"input": ' + b"[" * 100 + b"]" * 100 + b', "text": "x"}'
    response = api.client.post(route, headers={**key, "Content-Type": "application/json"}, content=body)
    assert_error(response, 400, "invalid_request")
    assert "deeper than" in response.json()["error"]["message"]


def test_a_nested_array_flood_within_the_default_plans_limit_is_400(api, key):
    body = b'{"input": ' + b"[]," * 3_000_000 + b'"x"}'  # 9 MB: within the plan's 14 MB
    response = api.client.post("/v1/moderations", headers={**key, "Content-Type": "application/json"}, content=body)
    assert_error(response, 400, "invalid_request")


def request_of(body: bytes) -> Request:
    chunks = [body[i : i + 65_536] for i in range(0, len(body), 65_536)]

    async def receive():
        return {"type": "http.request", "body": chunks.pop(0), "more_body": bool(chunks)}

    return Request({"type": "http", "method": "POST", "path": "/", "headers": []}, receive)


@pytest.mark.anyio
@pytest.mark.parametrize(("size", "off_loop"), [(1_000, False), (PARSE_OFF_LOOP_BYTES + 1, True)])
async def test_a_large_body_is_checked_and_parsed_off_the_event_loop(monkeypatch, size, off_loop):
    threads = []
    parse = bodies.json_object

    def spy(body, example):
        threads.append(threading.current_thread())
        return parse(body, example)

    monkeypatch.setattr(bodies, "json_object", spy)
    body = json.dumps({"text": "a" * size}).encode()
    assert (await read_json(request_of(body), None, None, 10 * MIB, "{}"))["text"] == "a" * size
    assert (threads[0] is not threading.current_thread()) is off_loop
