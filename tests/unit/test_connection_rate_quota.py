"""Connection creation rates (KIP-612): the node's and a listener's
``max.connection.creation.rate`` hold new connections (Kafka blocks its acceptor), an
address over its ``connection_creation_rate`` quota has its connection closed unread
after the throttle time. The arithmetic is Kafka's Rate: with 11 windows of 1 s a rate is
measured over at least 10 s, so a quota of R lets 10 x R connections through at once."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from ottla.broker.quota.connection_rate_quota import ConnectionRateQuotas
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build
from ottla.protocol.requests import ApiSpec, ApiTable
from ottla.server.network import ConnectionQuotas, KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher

NOW = 10_000_000


def test_a_listener_rate_lets_ten_windows_through_then_throttles_at_most_a_window() -> None:
    rates = ConnectionRateQuotas(11, 1, listener_rates={"PLAINTEXT": 5})
    assert [rates.record_accept("PLAINTEXT", False, NOW) for _ in range(50)] == [0] * 50
    # The 51st: 51 over 10 s is 5.1/s, 2% over: (5.1 - 5) / 5 x 10 s = 200 ms.
    assert rates.record_accept("PLAINTEXT", False, NOW) == 200
    assert rates.record_accept("PLAINTEXT", False, NOW) == 400
    assert rates.record_accept("OTHER", False, NOW) == 0  # another listener: its own rate
    for _ in range(50):
        throttle = rates.record_accept("PLAINTEXT", False, NOW)
    assert throttle == 1000  # at most one window


def test_the_node_rate_spares_a_protected_listener() -> None:
    rates = ConnectionRateQuotas(11, 1, node_rate=1)
    assert [rates.record_accept("A", False, NOW) for _ in range(10)] == [0] * 10
    assert rates.record_accept("A", False, NOW) > 0
    assert rates.record_accept("REPLICATION", True, NOW) == 0
    assert not ConnectionRateQuotas().accept_limited


def test_an_address_over_its_quota_is_refused_and_not_counted() -> None:
    rates = ConnectionRateQuotas(11, 1)
    rates.set_ip_quotas({"127.0.0.2": 2, None: 100})
    assert [rates.record_ip("L", False, "127.0.0.2", NOW) for _ in range(20)] == [0] * 20
    assert rates.record_ip("L", False, "127.0.0.2", NOW) == 500  # 2.1/s: 5% of 10 s
    # Refused connections are taken back: the next one is judged on the same 20.
    assert rates.record_ip("L", False, "127.0.0.2", NOW) == 500
    assert rates.record_ip("L", False, "127.0.0.3", NOW) == 0  # the default ip's 100/s
    assert rates.record_ip("L", False, "127.0.0.2", NOW + 600) == 0  # 21 over 10.6 s
    rates.update_ip_quota("127.0.0.2", None)  # back to the default
    assert all(rates.record_ip("L", False, "127.0.0.2", NOW + 600) == 0 for _ in range(500))
    rates.update_ip_quota(None, None)
    assert rates.ip_quota("127.0.0.2") is None


def test_ip_quotas_follow_the_metadata_image() -> None:
    managers = ClientQuotaManagers()
    managers.load({(("ip", "0:0:0:0:0:0:0:1"),): {"connection_creation_rate": 3.0},
                   (("ip", None),): {"connection_creation_rate": 7.0},
                   (("client-id", "c"),): {"producer_byte_rate": 10.0}})
    rates = managers.connection_rates
    assert (rates.ip_quota("::1"), rates.ip_quota("10.0.0.1")) == (3.0, 7.0)
    managers.apply([(("ip", "::1"),)], {(("ip", None),): {"connection_creation_rate": 7.0}})
    assert rates.ip_quota("::1") == 7.0


# --- on a listener -------------------------------------------------------------------


def list_groups(services: Any, ctx: Any, req: Any) -> Any:
    return {"throttle_time": 0, "error_code": 0, "groups": []}


async def server_with(rates: ConnectionRateQuotas) -> KafkaServer:
    table = ApiTable("broker", None, [ApiSpec(ApiKey.LIST_GROUPS, 0, 5, list_groups)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20,
                         quotas=ConnectionQuotas(rates=rates))
    await server.start()
    return server


async def answered_at(port: int, timeout: float = 5.0) -> float | None:
    """When a new connection's ListGroups was answered (loop time), or None if the
    connection was closed without an answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode_request(ApiKey.LIST_GROUPS, 5, 1, "t", build(
            request_schema(ApiKey.LIST_GROUPS, 5), {"states_filter": [], "types_filter": []})))
        try:
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4),
                                                                 timeout))
        except (asyncio.IncompleteReadError, ConnectionResetError):
            return None  # closed: unread data makes the close a reset
        decode_response(ApiKey.LIST_GROUPS, 5, await reader.readexactly(size))
        return asyncio.get_running_loop().time()
    finally:
        writer.close()


async def test_a_listener_over_its_rate_holds_connections_then_serves_them() -> None:
    """Two windows of 1 s and 1 connection/s: the first is taken at once, the second
    waits a second, and the third, arriving meanwhile, waits behind it."""
    server = await server_with(ConnectionRateQuotas(2, 1, listener_rates={"PLAINTEXT": 1}))
    loop = asyncio.get_running_loop()
    try:
        start = loop.time()
        first = await answered_at(server.port)
        assert first is not None and first - start < 0.5
        second, third = await asyncio.gather(answered_at(server.port),
                                             answered_at(server.port))
        assert second is not None and third is not None
        assert second - start >= 0.9
        assert third - start >= 1.9  # its own second, after the one before it
    finally:
        await server.stop()


async def test_an_address_over_its_rate_is_closed_unread() -> None:
    rates = ConnectionRateQuotas(2, 1)
    rates.set_ip_quotas({"127.0.0.1": 1})
    server = await server_with(rates)
    loop = asyncio.get_running_loop()
    try:
        assert await answered_at(server.port) is not None
        start = loop.time()
        assert await answered_at(server.port) is None  # closed, its request unanswered
        assert loop.time() - start >= 0.9  # after the throttle time
        assert server.quotas.total == 0  # the refused one never counted
        rates.update_ip_quota("127.0.0.1", None)
        assert await answered_at(server.port) is not None
    finally:
        await server.stop()
