"""`make serve` says ready only once /healthz answers 200 (runtime/deploy.py `wait_until_healthy`), against a real
HTTP server on loopback."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runtime.deploy import wait_until_healthy


@pytest.fixture
def health_server():
    """A server whose /healthz answers 503 for its first `state["unhealthy"]` calls, then 200."""
    state = {"unhealthy": 0, "calls": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            state["calls"] += 1
            status = 503 if state["calls"] <= state["unhealthy"] else 200
            self.send_response(status if self.path == "/healthz" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def test_it_waits_through_503s_until_healthz_answers_200(health_server):
    url, state = health_server
    state["unhealthy"] = 3
    assert wait_until_healthy(url, timeout_s=10, poll_s=0.01) is True
    assert state["calls"] == 4


def test_it_gives_up_after_its_timeout_and_says_so(health_server):
    url, state = health_server
    state["unhealthy"] = 10**9
    started = time.monotonic()
    assert wait_until_healthy(url, timeout_s=0.3, poll_s=0.05) is False
    assert time.monotonic() - started < 5


def test_a_port_that_refuses_connections_is_waited_on_not_an_error():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert wait_until_healthy(f"http://127.0.0.1:{port}", timeout_s=0.3, poll_s=0.05) is False
