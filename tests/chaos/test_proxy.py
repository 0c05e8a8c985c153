"""The fault proxy of one link, in isolation: an echo server behind it, a client in
front, each fault seen as the client sees it (bytes held, late, slow or refused)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from ottla.chaos.proxy import LinkProxy, ProxyNetwork


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[LinkProxy]:
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    target = server.sockets[0].getsockname()[:2]
    link = await LinkProxy("1->2", target).start()
    yield link
    await link.close()
    server.close()


async def round_trip(port: int, data: bytes = b"ping", timeout: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.readexactly(len(data)), timeout)
    finally:
        writer.close()


async def test_a_healthy_link_passes_bytes_both_ways(proxy: LinkProxy) -> None:
    assert await round_trip(proxy.port) == b"ping"
    big = bytes(range(256)) * 4096
    assert await round_trip(proxy.port, big) == big
    assert proxy.connections == 2


async def test_a_cut_link_drops_its_connections_and_refuses_new_ones_until_healed(
        proxy: LinkProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"a")
    assert await reader.readexactly(1) == b"a"
    await proxy.cut()
    assert await asyncio.wait_for(reader.read(1), 5) == b""  # closed under the client
    with pytest.raises(ConnectionRefusedError):
        await round_trip(proxy.port)
    await proxy.heal()
    assert await round_trip(proxy.port) == b"ping"


async def test_a_delayed_link_answers_late_and_in_order(proxy: LinkProxy) -> None:
    proxy.delay(0.2)
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    start = time.monotonic()
    for i in range(5):
        writer.write(b"%d" % i)
    assert await asyncio.wait_for(reader.readexactly(5), 5) == b"01234"
    assert time.monotonic() - start >= 0.4  # there and back
    writer.close()


async def test_a_slow_link_is_bounded_in_throughput(proxy: LinkProxy) -> None:
    proxy.slow(200_000)
    start = time.monotonic()
    data = b"x" * 200_000
    assert await round_trip(proxy.port, data, timeout=20) == data
    assert time.monotonic() - start >= 0.9


async def test_a_stalled_direction_holds_bytes_until_healed(proxy: LinkProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    proxy.stall("backward")  # requests arrive, answers are held
    writer.write(b"held")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(4), 0.5)
    await proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"held"
    writer.close()


@pytest.fixture
def network() -> Iterator[tuple[ProxyNetwork, dict[int, int]]]:
    """Two nodes' echo listeners behind a network with both directed links."""
    net = ProxyNetwork()

    async def listen() -> list[asyncio.Server]:
        return [await asyncio.start_server(echo, "127.0.0.1", 0) for _ in range(2)]

    servers = net.run(listen())
    ports = {1: net.add(1, 2, "RAFT", servers[1].sockets[0].getsockname()[:2]),
             2: net.add(2, 1, "RAFT", servers[0].sockets[0].getsockname()[:2])}
    yield net, ports

    async def close() -> None:
        for server in servers:
            server.close()

    net.run(close())
    net.close()


def ask(port: int, timeout: float) -> bytes | None:
    with socket.create_connection(("127.0.0.1", port), 5) as s:
        s.settimeout(timeout)
        s.sendall(b"hi")
        try:
            return s.recv(2)
        except TimeoutError:
            return None


def test_a_one_way_partition_stops_one_node_reaching_the_other_only(
        network: tuple[ProxyNetwork, dict[int, int]]) -> None:
    net, from_node = network
    assert ask(from_node[1], 5) == b"hi" and ask(from_node[2], 5) == b"hi"
    net.partition_one_way(1, 2)
    # 1's requests to 2 are held; 2's requests reach 1 but 1's answers are held
    assert ask(from_node[1], 0.5) is None
    assert ask(from_node[2], 0.5) is None
    net.heal()
    assert ask(from_node[1], 5) == b"hi" and ask(from_node[2], 5) == b"hi"
