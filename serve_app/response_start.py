"""The one ASGI send wrapper that notes a response's status as it starts: for the access log, the request metrics,
the deadline (which may answer only while nothing was sent) and the admin audit log (written before the client
hears the answer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import Message, Send


class NotingSend:
    """Passes every message on; on `http.response.start` notes the status and first runs `on_start`, which may add
    headers to the message or record it."""

    def __init__(self, send: Send, on_start: Callable[[Message], Awaitable[None]] | None = None):
        self.status: int | None = None
        self._send, self._on_start = send, on_start

    @property
    def started(self) -> bool:
        return self.status is not None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            if self._on_start is not None:
                await self._on_start(message)
        await self._send(message)
