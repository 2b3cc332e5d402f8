"""An HTTP request written by hand on a socket: headers first, then the body as slowly as a test wants."""

from __future__ import annotations

import json
import socket
import time


class RawRequest:
    """A request sent by hand (a text moderation by default): headers, then the body as the test decides."""

    def __init__(
        self, port: int, key: dict, body: bytes, extra: dict | None = None, *,
        path: str = "/v1/moderate-text", content_type: str = "application/json",
    ):
        self.body = body
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        headers = {
            "Host": "127.0.0.1", "Content-Type": content_type, "Content-Length": str(len(body)),
            **key, **(extra or {}),
        }
        head = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.sock.sendall(head.encode() + b"\r\n")
        self.started = time.monotonic()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> tuple[int, dict, dict, float]:
        """(status, headers, JSON body, seconds since the headers were sent)."""
        raw = b""
        while b"\r\n\r\n" not in raw:
            raw += self.sock.recv(65536)
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(rest) < int(headers.get("content-length", 0)):
            rest += self.sock.recv(65536)
        elapsed = time.monotonic() - self.started
        return int(lines[0].split()[1]), headers, json.loads(rest), elapsed

    def close(self) -> None:
        self.sock.close()
