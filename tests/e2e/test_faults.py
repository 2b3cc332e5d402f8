"""Faults in the real graph: the store, a model replica, the ingress replica killed; each heals without an operator.

- The embedded store (Valkey) is SIGKILLed under load (four clients sending texts back to back): meanwhile
  requests answer 503 (`store_unavailable`, Retry-After), never an allow and never another 5xx; the store
  supervisor starts it again (same port, same passwords, data from its AOF), requests answer 200 again within
  30 s of the kill, and what was acknowledged before the kill (a review item, its report count, an audit entry)
  reads back; nothing in Ray or Serve is restarted.
- The TextModel replica's worker process is SIGKILLed under the same load: every request answers 200
  (served by a replica) or 503 with Retry-After, never another 5xx, and Serve replaces the replica
  (/healthz 200 and text requests 200 again within a bound).
- The ModerationIngress replica's process is SIGKILLed under the same load: no 500; what HAProxy cannot forward is
  503 `ingress_unavailable` in the error shape; Serve starts a new replica and Ray reloads HAProxy through our
  launcher (runtime/haproxy_rules.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import ray

STORE_DOWN_BOUND_S = 10  # each request while the store is down is answered within this
RECOVERY_BOUND_S = 30  # after the store is back, a request succeeds within this
REPLICA_BOUND_S = 150  # Serve replaces a killed replica (and it loads its model) within this
LOAD_CLIENTS = 4


def _text(client, key, text: str = "hello there"):
    return client.post("/v1/moderate-text", headers=key, json={"text": text}, timeout=60)


def _assert_unavailable(response, code: str | None = None) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert int(response.headers["Retry-After"]) >= 1
    if code:
        assert response.json()["error"]["code"] == code, response.text


def _until_ok(send, what: str) -> list[int]:
    """Sends until a 2xx, allowing only 503 store_unavailable meanwhile; the statuses seen."""
    deadline, seen = time.monotonic() + RECOVERY_BOUND_S, []
    while True:
        response = send()
        seen.append(response.status_code)
        if response.status_code < 300:
            return seen
        _assert_unavailable(response, "store_unavailable")
        assert time.monotonic() < deadline, f"{what} did not recover after the store came back: {seen}"
        time.sleep(0.2)


def _error_code(response) -> str | None:
    """The documented error body's code; a body that is not one is named by its content type."""
    if response.status_code == 200:
        return None
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return f"not the error shape: {response.headers.get('content-type')} {response.text[:60]!r}"


def _load(base_url: str, key: dict, stop: threading.Event, seen: list) -> None:
    """One client sending texts back to back until `stop`: (monotonic time answered, status, error code,
    Retry-After, seconds it took) of each answer; status 0 for no HTTP answer at all."""
    with httpx.Client(base_url=base_url, timeout=60) as http:
        while not stop.is_set():
            started = time.monotonic()
            try:
                response = _text(http, key)
            except httpx.HTTPError as error:
                seen.append((time.monotonic(), 0, type(error).__name__, None, time.monotonic() - started))
                continue
            now = time.monotonic()
            seen.append((now, response.status_code, _error_code(response), response.headers.get("Retry-After"),
                         now - started))


def _start_load(base_url: str, key: dict) -> tuple[threading.Event, list, list[threading.Thread]]:
    """LOAD_CLIENTS clients sending texts back to back until the event is set; their answers go to the list."""
    stop, seen = threading.Event(), []
    loaders = [threading.Thread(target=_load, args=(base_url, key, stop, seen)) for _ in range(LOAD_CLIENTS)]
    for loader in loaders:
        loader.start()
    return stop, seen, loaders


def _healed_after(seen: list, killed_at: float) -> float:
    """Seconds from the kill to the first 200 after its last refusal, or after the kill itself when the client's
    reconnects hid the restart altogether (waits up to RECOVERY_BOUND_S, and for answers 1 s past the kill)."""
    while True:
        answers = [(t, status) for t, status, *_ in list(seen) if t > killed_at]
        if answers and answers[-1][0] > killed_at + 1:
            last_refusal = max((t for t, status in answers if status != 200), default=killed_at)
            back = next((t for t, status in answers if t > last_refusal and status == 200), None)
            if back is not None:
                return back - killed_at
        assert time.monotonic() - killed_at < RECOVERY_BOUND_S, f"no 200 within {RECOVERY_BOUND_S} s: {seen[-20:]}"
        time.sleep(0.2)


def test_the_store_sigkilled_under_load_is_restarted_by_the_supervisor_and_nothing_acknowledged_is_lost(
    serve_graph, client, admin_client, new_key
):
    """No operator: the supervisor (runtime/store_supervisor.py) starts the store again on the same port with its AOF,
    the replicas and the admin listener reconnect by themselves, and what was acknowledged before the kill is there."""
    store, supervisor = serve_graph["store"], serve_graph["supervisor"]
    plan = {"scope": "both", "monthly_quota": 10_000_000, "rate_per_second": 10_000, "burst": 10_000}
    assert admin_client.put("/admin/v1/plans/fault-load", json=plan).status_code == 200  # the load is not rate limited
    key = new_key(account="store-fault", plan="fault-load")
    escalated = [client.post("/v1/report", headers=key, files={"reference": (None, "kill-ref")}).json()
                 for _ in range(4)][-1]
    review_id = escalated["review_id"]
    before = client.get(f"/v1/review/{review_id}", headers=key).json()
    restarts = supervisor.restarts
    stop, seen, loaders = _start_load(serve_graph["base_url"], key)
    try:
        time.sleep(2)
        killed_pid = store.pid
        os.kill(killed_pid, signal.SIGKILL)  # no SHUTDOWN, no final flush
        killed_at = time.monotonic()
        healed_s = _healed_after(seen, killed_at)
        time.sleep(2)
    finally:
        stop.set()
        for loader in loaders:
            loader.join(timeout=90)
    assert supervisor.restarts == restarts + 1 and store.pid != killed_pid
    for _, status, code, retry_after, took_s in seen:
        if status != 200:  # never an allow without the store, never a 500, never a hang
            assert status == 503 and code in ("store_unavailable", "overloaded") and int(retry_after) >= 1, seen
            assert took_s < STORE_DOWN_BOUND_S, seen
    refused = [t - killed_at for t, status, *_ in seen if status != 200]
    print(f"\nstore SIGKILLed under load: first 200 again {healed_s:.1f} s after the kill, last 503 "
          f"{max(refused, default=0):.1f} s after it; {len(seen)} answers, {len(refused)} of them 503")
    # Nothing acknowledged is lost: the review item, its report count, and the audit entry of the key's creation.
    _until_ok(lambda: client.get(f"/v1/review/{review_id}", headers=key), "the review")
    assert client.get(f"/v1/review/{review_id}", headers=key).json() == before
    again = client.post("/v1/report", headers=key, files={"reference": (None, "kill-ref")}).json()
    assert (again["reports"], again["review_id"]) == (5, review_id)
    _until_ok(lambda: admin_client.get("/admin/v1/audit"), "the admin API")
    audit = admin_client.get("/admin/v1/audit", params={"limit": 1000}).json()
    assert any(e["action"] == "POST /admin/v1/keys" and e["status"] == 201 for e in audit["entries"])
    deadline = time.monotonic() + RECOVERY_BOUND_S  # /healthz answers a snapshot refreshed every 2 s
    while client.get("/healthz").status_code != 200:
        assert time.monotonic() < deadline, "/healthz not 200 again after the store came back"
        time.sleep(0.25)


def _replicas(deployment: str = "TextModel") -> list[dict]:
    return [
        actor for actor in ray._private.state.actors().values()
        if actor.get("State") == "ALIVE" and f":{deployment}" in actor.get("ActorClassName", "")
    ]  # fmt: skip


def _fault_key(client, admin_client, new_key, account: str) -> dict:
    """A key whose plan never limits the load below; a text answers 200 with it first."""
    plan = {"scope": "both", "monthly_quota": 10_000_000, "rate_per_second": 10_000, "burst": 10_000}
    assert admin_client.put("/admin/v1/plans/fault-load", json=plan).status_code == 200
    key = new_key(account=account, plan="fault-load")
    assert _text(client, key).status_code == 200
    return key


def _kill_under_load(base_url: str, client, key: dict, deployment: str, healed_after_s: float = 0.0):
    """SIGKILLs the first live replica of `deployment` (its worker process, as the OOM killer would) while four
    clients send texts, and waits until Serve has replaced it, a text answered 200 more than `healed_after_s` after
    the kill and /healthz is 200. Returns every answer (see _load), the kill's time and the seconds to heal."""
    victim = _replicas(deployment)[0]
    assert victim["Pid"], f"no live {deployment} replica found"
    stop, seen, loaders = _start_load(base_url, key)
    try:
        time.sleep(2)
        os.kill(victim["Pid"], signal.SIGKILL)
        killed_at = time.monotonic()
        while True:
            replaced = any(r["ActorID"] != victim["ActorID"] for r in _replicas(deployment))
            recent = list(seen)[-8:]
            if replaced and any(t > killed_at + healed_after_s and status == 200 for t, status, *_ in recent):
                if client.get("/healthz").status_code == 200:
                    break
            assert time.monotonic() - killed_at < REPLICA_BOUND_S, f"not replaced in time: {seen[-20:]}"
            time.sleep(0.5)
        healed_s = time.monotonic() - killed_at
    finally:
        stop.set()
        for loader in loaders:
            loader.join(timeout=90)
    return seen, killed_at, healed_s


def test_a_model_replica_sigkilled_under_load_gives_200_or_503_and_serve_replaces_it(
    serve_graph, client, admin_client, new_key
):
    key = _fault_key(client, admin_client, new_key, "replica-fault")
    seen, _, healed_s = _kill_under_load(serve_graph["base_url"], client, key, "TextModel")
    for _, status, code, retry_after, _took in seen:
        if status != 200:  # 503 with Retry-After, never another 5xx
            assert status == 503 and int(retry_after) >= 1, (status, code)
    refused = sum(status != 200 for _, status, *_ in seen)
    print(f"\nTextModel replica SIGKILLed under load: replaced and healthy {healed_s:.1f} s after the kill; "
          f"{len(seen)} answers, {refused} of them 503")
    assert all(_text(client, key).status_code == 200 for _ in range(3))  # and it keeps serving


def test_the_ingress_replica_sigkilled_under_load_gives_200_or_our_503_and_serve_replaces_it(
    serve_graph, client, admin_client, new_key
):
    """The one ModerationIngress replica's process SIGKILLed under load: HAProxy meets dead connections, then no
    server, until Serve starts a new replica and Ray reloads HAProxy (through our launcher again). Before our rules
    HAProxy answered a request it could not forward with Ray's plain-text 500; now with 503 `ingress_unavailable` in
    the documented shape with Retry-After. A request in flight on the replica at the kill gets its connection closed
    without an answer (HAProxy mimics the server on a reused connection, so the client may retry); never a 500."""
    key = _fault_key(client, admin_client, new_key, "ingress-fault")
    seen, killed_at, healed_s = _kill_under_load(serve_graph["base_url"], client, key, "ModerationIngress", 1.0)
    refusals = [(status, code, retry_after) for _, status, code, retry_after, _took in seen if status != 200]
    when = [f"{t - killed_at:+.1f} s ({took:.1f} s) {status}" for t, status, _, _, took in seen if status != 200]
    print(f"\nModerationIngress replica SIGKILLed under load: replaced and healthy {healed_s:.1f} s after the kill; "
          f"{len(seen)} answers, refusals {sorted(set(refusals))} x{len(refusals)}, answered at (taking) {when}")
    for answered_at, status, code, retry_after, took in seen:
        if status == 0:
            # Sent on a reused connection to the dead replica (HAProxy keeps a few idle ones): HAProxy closes the
            # client's connection without an answer, as the replica did, so that the client may retry (RFC 9112,
            # 9.3.1). Only at the kill: once HAProxy has seen the replica's connections fail, it answers 503.
            assert code == "RemoteProtocolError" and answered_at < killed_at + 1.0, (answered_at - killed_at, took)
        elif status != 200:
            assert status == 503 and code in ("ingress_unavailable", "overloaded") and int(retry_after) >= 1, (status, code)
    assert all(_text(client, key).status_code == 200 for _ in range(3))
