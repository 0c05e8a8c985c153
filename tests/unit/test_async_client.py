"""The nodes' AsyncClient when a connection breaks the moment it opens (a node going
down, a proxy whose far side is gone): requests fail with NodeUnavailable, the error
their callers handle, never with an internal AssertionError (seen in chaos runs: a Raft
send task dying with it, a broker heartbeat failing with it)."""

from __future__ import annotations

import asyncio

from ottla.client.async_client import AsyncClient, NodeUnavailable
from ottla.protocol.api import ApiKey


class BreaksOnOpen(AsyncClient):
    """The connection is lost before the request waiting for it resumes."""

    async def _open(self) -> None:
        await super()._open()
        asyncio.get_running_loop().call_soon(self._disconnect, NodeUnavailable("lost"))


async def test_a_connection_lost_as_it_opens_fails_requests_as_node_unavailable() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    client = BreaksOnOpen("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        requests = [client.request(ApiKey.API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}, 5)
            for _ in range(3)]
        for outcome in await asyncio.gather(*requests, return_exceptions=True):
            assert isinstance(outcome, NodeUnavailable), repr(outcome)
    finally:
        await client.close()
        server.close()
