"""Each site's own line through the real graph: audits queue allowed texts with their evidence from the real text
model (it crosses Ray, the cascade included), a decision keeps the label, `POST /v1/feedback` keeps one, a refit
answers why it is (not) live, and a live correction changes the toxic score of its own account only, by exactly its
formula, with its version in `model_version` (docs/site-adaptation.md)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import redis

from adaptation.correction import Correction
from store import redis_keys

TEXTS = ("What a lovely afternoon at the lake.", "Thanks for the detailed answer, it helped.",
         "You are an idiot and nobody likes you.")


@pytest.fixture(scope="module")
def site(admin_client, new_key) -> dict:
    default = admin_client.get("/admin/v1/profiles/default").json()
    default.pop("name", None)
    profile = {**default, "mode": "monitor", "audit_rate": 1.0}  # monitor: every answer allowed, so every one audited
    assert admin_client.put("/admin/v1/profiles/site-audited", json=profile).status_code == 200
    return {"key": new_key(account="site-a", profile="site-audited"),
            "other": new_key(account="site-b", profile="site-audited")}


def _labels(serve_graph, account: str) -> list[dict]:
    with redis.Redis.from_url(serve_graph["redis_url"], decode_responses=True) as store:
        return [json.loads(entry) for entry in store.lrange(redis_keys.labels(account), 0, -1)]


def test_audited_texts_decided_by_moderators_become_labels_with_the_served_embedding(client, admin_client, site,
                                                                                     serve_graph):
    for text in TEXTS:
        answer = client.post("/v1/moderate-text", headers=site["key"], json={"text": text})
        assert answer.status_code == 200 and "review_id" not in answer.json()
    items = admin_client.get("/admin/v1/reviews", params={"account": "site-a", "status": "pending"}).json()["items"]
    assert sorted(item["reason"] for item in items) == ["audit"] * len(TEXTS)
    for item in items:
        status = "rejected" if "idiot" in item["text"] else "approved"
        assert admin_client.post(f"/admin/v1/reviews/{item['id']}/decision", json={"status": status}).status_code == 200
    labels = _labels(serve_graph, "site-a")
    assert len(labels) == len(TEXTS) and {label["seen"] for label in labels} == {"audit"}
    assert sum(label["harmful"] for label in labels) == 1
    assert all(len(label["embedding"]) == 1368 and label["language"] == "en" for label in labels)
    assert not any(text in json.dumps(labels) for text in TEXTS)


def test_feedback_keeps_a_label_and_a_refit_says_why_it_is_not_live(client, admin_client, site, serve_graph):
    answer = client.post("/v1/feedback", headers=site["key"], json={"text": "go away loser", "label": "harmful"})
    assert answer.status_code == 200 and answer.json()["kept"] is True
    refit = admin_client.post("/admin/v1/accounts/site-a/text-adaptation/refit")
    assert refit.status_code == 200, refit.text
    assert refit.json()["active"] is False and "Too few" in refit.json()["reason"]
    assert refit.json()["labels"] == {"decided": len(TEXTS), "reported": 1}
    assert refit.json()["profile"] == "site-audited" and refit.json()["backtest"]["labels"] == len(TEXTS) + 1


def test_a_live_correction_changes_only_its_accounts_toxic_score_by_its_formula(client, site, serve_graph):
    correction = Correction.build(np.zeros(512, dtype=np.float32), 1.0)  # shifts every logit by +1
    encoder = _labels(serve_graph, "site-a")[0]["encoder"]  # the served text model's, as the labels say
    assert encoder.startswith("usem3")
    with redis.Redis.from_url(serve_graph["redis_url"], decode_responses=True) as store:
        store.set(redis_keys.adaptation("site-a"), json.dumps({"active": True, "correction": correction.document(),
                                                               "encoder": encoder}))
    text = "the moderators here are clowns"
    deadline = time.monotonic() + 30  # each ingress replica reads an account's fit at most every 5 s
    while True:
        corrected = client.post("/v1/moderate-text", headers=site["key"], json={"text": text}).json()
        if corrected["model_version"].endswith(f"+{correction.version}") or time.monotonic() > deadline:
            break
        time.sleep(1)
    served = client.post("/v1/moderate-text", headers=site["other"], json={"text": text}).json()
    assert corrected["model_version"] == f"{served['model_version']}+{correction.version}"
    logit = math.log(served["categories"]["toxic"] / (1 - served["categories"]["toxic"]))
    assert corrected["categories"]["toxic"] == pytest.approx(1 / (1 + math.exp(-(logit + 1.0))), abs=1e-6)
    assert corrected["categories"]["insult"] == served["categories"]["insult"]
