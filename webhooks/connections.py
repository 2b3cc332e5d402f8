"""The webhook sender's HTTP clients, one per receiver origin, so that a kept-alive connection only ever carries
requests for the host whose name it was opened with and whose certificate it verified.

The sender connects to the address it checked, with the URL's host as Host header and TLS SNI name
(webhooks/sender.py). httpx pools connections by the URL it is handed, here that address: with one client for every
receiver, a second host on the same address reused a connection whose TLS was verified for the first, so its
delivery went out without any check of its own certificate. Each origin (scheme, host, port) gets its own client;
the least recently used idle ones are closed past `max_clients`, and one in use is never closed under its request.
"""

from __future__ import annotations

import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx

Origin = tuple[str, str, int]  # scheme, host as in the URL, port
# Clients kept (each with its own connections); the oldest idle ones beyond are closed.
MAX_CLIENTS = 64


@dataclass
class _Kept:
    client: httpx.AsyncClient
    users: int = 0


class ClientsByOrigin:
    def __init__(self, trust: ssl.SSLContext | None = None, max_clients: int = MAX_CLIENTS):
        # The receivers' certificates are verified against this: certifi's roots unless the caller gives a context.
        self._trust = trust or httpx.create_ssl_context(trust_env=False)
        self.max_clients = max_clients
        self._kept: OrderedDict[Origin, _Kept] = OrderedDict()  # least recently used first

    def _new_client(self) -> httpx.AsyncClient:
        # No redirects followed by httpx (the sender decides), no proxy from the environment, no cookies kept.
        return httpx.AsyncClient(follow_redirects=False, trust_env=False, verify=self._trust)

    @asynccontextmanager
    async def client_for(self, origin: Origin) -> AsyncIterator[httpx.AsyncClient]:
        kept = self._kept.pop(origin, None) or _Kept(self._new_client())
        self._kept[origin] = kept
        kept.users += 1
        try:
            yield kept.client
        finally:
            kept.users -= 1
            await self._close_beyond_the_bound()

    async def _close_beyond_the_bound(self) -> None:
        idle = [origin for origin, kept in self._kept.items() if kept.users == 0]
        # Taken out before any await, so that no request can pick one up while it closes.
        closing = [self._kept.pop(origin) for origin in idle[: max(0, len(self._kept) - self.max_clients)]]
        for kept in closing:
            await kept.client.aclose()

    async def aclose(self) -> None:
        while self._kept:
            await self._kept.popitem()[1].client.aclose()
