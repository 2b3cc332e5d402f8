"""A real webhook receiver on loopback: an HTTP server in a thread that verifies each request with `standardwebhooks`,
as a client of the service would, and answers what the test scripts (a status, headers, a delay)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: dict | None  # the payload, when the signature verified with the receiver's secret
    at: float = field(default_factory=time.time)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class WebhookReceiver:
    def __init__(self, secret: str | None = None):
        self.secret = secret
        self.received: list[Received] = []
        self.answers: deque[Answer] = deque()  # scripted answers, in order; then 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.received.append(Received(self.path, headers, body, receiver._verify(body, headers)))
                answer = receiver.answers.popleft() if receiver.answers else Answer()
                time.sleep(answer.delay_s)
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _verify(self, body: bytes, headers: dict[str, str]) -> dict | None:
        if self.secret is None:
            return None
        try:
            return Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            return None

    def verified_events(self) -> list[dict]:
        return [r.verified for r in self.received if r.verified is not None]

    def wait_for(self, count: int, timeout_s: float = 30) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(self.received)} of {count} webhook requests arrived")
            time.sleep(0.05)
        return self.received

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.shutdown()
        self._server.server_close()


def event_types(received: list[Received]) -> list[str]:
    return [json.loads(r.body)["type"] for r in received]
