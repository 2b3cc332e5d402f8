"""Random garbage at every endpoint: always a 4xx (or 2xx) with the error body, never a 5xx.

A seeded generator, so a failure replays exactly.
"""

from __future__ import annotations

import json
import random

import pytest

ENDPOINTS = [
    ("POST", "/v1/moderate"),
    ("POST", "/v1/moderate-text"),
    ("POST", "/v1/report"),
    ("GET", "/v1/review/1"),
    ("PUT", "/admin/v1/plans/p"),
    ("PUT", "/admin/v1/profiles/p"),
    ("POST", "/admin/v1/keys"),
    ("POST", "/admin/v1/reviews/1/decision"),
]
CONTENT_TYPES = [
    "application/json",
    "multipart/form-data; boundary=xyz",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
    "text/plain",
    "",
]


def random_json(rng: random.Random, depth: int = 0):
    kind = rng.choice(["str", "num", "bool", "null", "list", "dict"] if depth < 3 else ["str", "num", "null"])
    if kind == "str":
        return "".join(rng.choice("ab\u00e9\u4e2d\U0001f600\x00\n\"\\") for _ in range(rng.randint(0, 12)))
    if kind == "num":
        return rng.choice([0, -1, 1.5, 1e308, -1e-9, 2**70])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    keys = ["text", "reference", "image_url", "scope", "mode", "categories", "status", "account", "plan", "profile", "x"]
    return {rng.choice(keys): random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def random_body(rng: random.Random) -> bytes:
    choice = rng.random()
    if choice < 0.4:
        return json.dumps(random_json(rng)).encode()
    if choice < 0.7:
        name = rng.choice(["image", "file", "reference", "image_url", "x"])
        filename = rng.choice(['; filename="a.jpg"', ""])
        payload = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
        return b'--xyz\r\nContent-Disposition: form-data; name="%s"%s\r\n\r\n%s\r\n--xyz--\r\n' % (
            name.encode(), filename.encode(), payload)
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, 128)))


@pytest.mark.parametrize("seed", range(8))
def test_garbage_requests_never_get_a_5xx(api, key, seed):
    api.put_plan("roomy", scope="both", monthly_quota=10**6, rate_per_second=10**4, burst=10**4)
    headers = api.new_key(plan="roomy")
    rng = random.Random(seed)
    for _ in range(40):
        method, path = rng.choice(ENDPOINTS)
        auth = api.admin if path.startswith("/admin") else headers
        query = rng.choice([{}, {"threshold": rng.choice(["0.5", "-3", "x", "1e400", ""])}, {"status": "weird"}])
        response = api.client.request(
            method, path, content=random_body(rng), params=query,
            headers={**auth, "Content-Type": rng.choice(CONTENT_TYPES)},
        )
        assert response.status_code < 500, (seed, method, path, response.text)
        if response.status_code >= 400:
            assert set(response.json()) == {"error"}
