"""Ray's metrics endpoint of the real graph serves the service's metrics and Serve's built-ins after a few requests."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

EXAMPLE_IMAGE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "coffee.jpg"
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)", re.M)
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics_url() -> str:
    import ray

    port = ray._private.worker._global_node.metrics_export_port  # the node this test's graph runs on
    return f"http://127.0.0.1:{port}/metrics"


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (m["name"], dict(LABEL.findall(m["labels"] or "")), float(m["value"]))
        for m in SAMPLE.finditer(text)
        if not m["name"].startswith("#")
    ]


def find(found, name: str, **labels) -> list[tuple[dict[str, str], float]]:
    return [(tags, value) for n, tags, value in found if n == name and labels.items() <= tags.items()]


WANTED = {
    "ray_moderation_requests_total": {"endpoint": "/v1/moderate-text", "method": "POST", "status": "200"},
    "ray_moderation_quota_refusals_total": {"endpoint": "/v1/moderate-text"},
    "ray_moderation_decisions_total": {"kind": "text", "mode": "enforce", "deployment": "ModerationIngress"},
    "ray_moderation_category_verdicts_total": {"kind": "image", "category": "nsfw", "verdict": "allow"},
    "ray_moderation_model_call_latency_ms_count": {"target": "text", "outcome": "ok"},
    "ray_moderation_model_batch_latency_ms_count": {"model": "image", "deployment": "ImageModel"},
    "ray_moderation_model_batch_size_bucket": {"model": "text", "deployment": "TextModel"},
    "ray_moderation_image_prepare_latency_ms_count": {"model": "image", "deployment": "ImageModel"},
    # Serve's built-ins: queues
    "ray_serve_deployment_queued_queries": {"deployment": "TextModel"},
    "ray_serve_replica_processing_queries": {"deployment": "TextModel"},
    # ours: the replicas batch with models/batch_queue.py, not @serve.batch
    "ray_moderation_model_batch_queue_length": {"model": "text", "deployment": "TextModel"},
}


def test_metrics_endpoint_serves_the_service_metrics(client, admin_client, new_key):
    plan = {"scope": "both", "monthly_quota": 1, "rate_per_second": 50, "burst": 50}
    assert admin_client.put("/admin/v1/plans/metrics-one", json=plan).status_code == 200
    key = new_key(plan="metrics-one", account="metrics-e2e")
    texts = [{"text": f"hello number {i}"} for i in range(3)]
    assert client.post("/v1/moderate-text", json=texts[0], headers=key).status_code == 200
    assert client.post("/v1/moderate-text", json=texts[1], headers=key).status_code == 402
    other = new_key(account="metrics-e2e-2")
    with EXAMPLE_IMAGE.open("rb") as image:
        assert client.post("/v1/moderate", files={"image": image}, headers=other).status_code == 200
    assert client.get("/no/such/path").status_code == 404

    # Ray's processes report every METRICS_REPORT_S (tests/e2e/conftest.py): poll until every wanted series is there,
    # a few times a report, so the last series is read soon after it is reported.
    deadline, missing = time.monotonic() + 60, dict(WANTED)
    while missing and time.monotonic() < deadline:
        found = samples(httpx.get(metrics_url(), timeout=10).text)
        missing = {name: labels for name, labels in WANTED.items() if not find(found, name, **labels)}
        if not find(found, "ray_moderation_requests_total", status="404"):  # its own series: it can come a push later
            missing["ray_moderation_requests_total, status 404"] = {"status": "404"}
        if missing:
            time.sleep(0.5)
    assert not missing, f"not exported: {sorted(missing)}"

    ok = find(found, "ray_moderation_requests_total", endpoint="/v1/moderate-text", status="200")
    assert sum(v for _, v in ok) >= 1
    assert sum(v for _, v in find(found, "ray_moderation_quota_refusals_total", endpoint="/v1/moderate-text")) >= 1
    unmatched = find(found, "ray_moderation_requests_total", status="404")
    assert unmatched and {t["endpoint"] for t, _ in unmatched} == {"unmatched"}  # never the raw path
    assert all(t["application"] == "moderation" for t, _ in ok)
    # No label carries a key, an account or a raw path.
    for name, tags, _ in found:
        if name.startswith("ray_moderation_"):
            assert not any("mod_" in v or "metrics-e2e" in v or "/no/such" in v for v in tags.values()), (name, tags)
