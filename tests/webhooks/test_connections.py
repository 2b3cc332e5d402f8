"""The sender's clients per receiver origin: one each, a bounded number kept, none closed under a request."""

from __future__ import annotations

import pytest

from webhooks.connections import ClientsByOrigin

pytestmark = pytest.mark.anyio


async def test_each_origin_has_a_client_of_its_own_and_keeps_it():
    clients = ClientsByOrigin()
    async with clients.client_for(("https", "a.example", 443)) as first:
        pass
    async with clients.client_for(("https", "b.example", 443)) as other_host:
        pass
    async with clients.client_for(("https", "a.example", 8443)) as other_port:
        pass
    async with clients.client_for(("https", "a.example", 443)) as again:
        pass
    assert again is first and len({id(first), id(other_host), id(other_port)}) == 3
    await clients.aclose()
    assert first.is_closed and other_host.is_closed


async def test_past_the_bound_the_least_recently_used_idle_clients_are_closed_and_one_in_use_never():
    clients = ClientsByOrigin(max_clients=2)
    async with clients.client_for(("https", "busy.example", 443)) as busy:
        opened = []
        for n in range(4):
            async with clients.client_for(("https", f"h{n}.example", 443)) as client:
                opened.append(client)
        assert not busy.is_closed  # the oldest, but its request is under way
        assert [client.is_closed for client in opened] == [True, True, True, False]
    async with clients.client_for(("https", "new.example", 443)):
        pass
    assert busy.is_closed and not opened[-1].is_closed  # idle now, and the least recently used
    await clients.aclose()
