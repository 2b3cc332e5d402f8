"""Hostile traffic against the real graph (time bounds): the default limits, through Ray's proxy.

- 20 uploads trickling a byte a second from one account: another account's text request is
  answered within 5 s, and the uploads over the account's in-flight cap (16) get 429 at once.
- A body that stalls while the client sends the headers Ray's proxy obeys to lift its timeout
  and disconnect check: cut with 408 `request_timeout` by the ingress's 10 s idle timeout.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

from support.raw_http import RawRequest

RAY_HEADERS = {"x-request-timeout-seconds": "0", "x-request-disconnect-disabled": "?1"}
BOUNDARY = "hostile"
CAP = 16  # MODERATION_MAX_BODIES_IN_PROGRESS_PER_ACCOUNT's default
IDLE_S = 10  # MODERATION_BODY_IDLE_TIMEOUT_S's default


def _port(serve_graph) -> int:
    return urlsplit(serve_graph["base_url"]).port


def _text_latency(client, key) -> float:
    started = time.monotonic()
    response = client.post("/v1/moderate-text", headers=key, json={"text": "hello there"})
    assert response.status_code == 200, response.text
    return time.monotonic() - started


def test_trickled_uploads_of_one_account_do_not_starve_another(serve_graph, client, new_key):
    attacker, other = new_key(account="trickler"), new_key(account="bystander")
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\n'.encode()
        + b"\xff" * 4000 + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    uploads = [
        RawRequest(_port(serve_graph), attacker, body, path="/v1/moderate",
                   content_type=f"multipart/form-data; boundary={BOUNDARY}")
        for _ in range(20)
    ]
    stop = threading.Event()

    def trickle() -> None:
        sent = 0
        while not stop.is_set():
            for upload in uploads:
                try:
                    upload.send(body[sent:sent + 1])
                except OSError:
                    pass  # answered (429) and closed by the server
            sent += 1
            stop.wait(1.0)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        time.sleep(2)  # every upload is authenticated and trickling
        assert _text_latency(client, other) < 5.0
        refused = []
        # One half-second for all 20 answers together, not half a second each: the refusals were answered at once
        # (within the 2 s above), so they are already waiting on their sockets, and each upload still trickling held
        # the test for its own full 0.5 s (16 of them: 8 s). A refusal must now be there within 2.5 s, not 2 s plus
        # 0.5 s per upload before it.
        answers_by = time.monotonic() + 0.5
        for upload in uploads:
            upload.sock.settimeout(max(answers_by - time.monotonic(), 0.05))
            try:
                status, headers, error, _ = upload.response()
            except TimeoutError:
                continue  # still trickling: holds one of the account's slots
            refused.append(status)
            assert status == 429 and error["error"]["code"] == "too_many_requests_in_flight", error
            assert int(headers["retry-after"]) >= 1
        assert len(refused) == len(uploads) - CAP
        assert _text_latency(client, other) < 5.0
    finally:
        stop.set()
        thread.join(timeout=5)
        for upload in uploads:
            upload.close()


def test_a_stalled_body_with_ray_timeout_headers_is_cut(serve_graph, client, new_key):
    attacker, other = new_key(account="staller"), new_key(account="bystander2")
    stalled = RawRequest(_port(serve_graph), attacker, b'{"text": "hello there"}', RAY_HEADERS)
    stalled.send(b'{"te')  # then nothing, with Ray told not to time out
    try:
        assert _text_latency(client, other) < 5.0
        status, _, error, elapsed = stalled.response()
    finally:
        stalled.close()
    assert status == 408 and error["error"]["code"] == "request_timeout", error
    assert IDLE_S - 1 <= elapsed < IDLE_S + 5
