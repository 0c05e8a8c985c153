"""``request_percentage`` (Kafka's ClientRequestQuotaManager): a client is charged the
time its requests' handlers run, as a percentage of one thread, and over its quota its
answers carry a throttle time (at most one window) and its connection is muted for it.
The time a handler waits (a commit, a long poll) is not charged, as Kafka charges its
threads' time; the inter-broker APIs are exempt."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any

from ottla.broker.quota.client_quota_manager import ABSENT, ClientQuotaManager, QuotaType
from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.messages import build
from ottla.protocol.requests import ApiSpec, ApiTable
from ottla.server.network import ConnectionQuotas, KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher

LIST_GROUPS = {"states_filter": [], "types_filter": []}


def burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def busy(services: Any, ctx: Any, req: Any) -> Any:
    burn(0.15)
    return {"throttle_time": 0, "error_code": 0, "groups": []}


async def waiting(services: Any, ctx: Any, req: Any) -> Any:
    await asyncio.sleep(0.3)  # waits: not charged
    burn(0.02)
    return {"throttle_time": 0, "groups": []}


def heartbeat(services: Any, ctx: Any, req: Any) -> Any:
    burn(0.15)
    return {"throttle_time": 0, "error_code": 0, "is_caught_up": True, "is_fenced": False,
            "should_shut_down": False}


async def serving(quota: float) -> tuple[KafkaServer, ClientQuotaManager]:
    """A listener whose client id ``limited`` may use ``quota`` percent of a thread,
    measured over two windows of 1 s (so at least 1 s)."""
    manager = ClientQuotaManager(QuotaType.REQUEST, samples=2, window_seconds=1,
                                 max_throttle_ms=1000)
    manager.update_quota((ABSENT, "limited"), quota)
    table = ApiTable("broker", None, [ApiSpec(ApiKey.LIST_GROUPS, 0, 5, busy),
                                      ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, waiting),
                                      ApiSpec(ApiKey.BROKER_HEARTBEAT, 0, 1, heartbeat)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20,
                         quotas=ConnectionQuotas(request_quota=manager))
    await server.start()
    return server, manager


async def ask(port: int, client_id: str, api_key: int, version: int, body: dict[str, Any],
              times: int = 1) -> list[tuple[Any, float]]:
    """Each answer on one connection, with when it came (loop time)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        for i in range(times):
            writer.write(encode_request(api_key, version, i, client_id,
                                        build(request_schema(api_key, version), body)))
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            _, response = decode_response(api_key, version, await reader.readexactly(size))
            answers.append((response, asyncio.get_running_loop().time()))
    finally:
        writer.close()
    return answers


def throttle_ms(response: Any) -> int:
    return round(response.throttle_time.total_seconds() * 1000)


async def test_a_client_over_its_request_percentage_is_throttled_and_muted() -> None:
    server, _ = await serving(10)  # 100 ms of handler time a second
    try:
        start = asyncio.get_running_loop().time()
        (first, _), (second, second_at) = await ask(server.port, "limited",
                                                    ApiKey.LIST_GROUPS, 5, LIST_GROUPS, 2)
        # 150 ms (and a little decoding) over 1 s is 15%: (15 - 10) / 10 of a second.
        # Then 30%: capped at one window, 1 s.
        assert 500 <= throttle_ms(first) <= 1000
        assert throttle_ms(second) == 1000
        assert second_at - start >= 0.5 + 0.3  # the second waited out the first's throttle
        # Another client id is not charged.
        answers = await ask(server.port, "other", ApiKey.LIST_GROUPS, 5, LIST_GROUPS, 2)
        assert [throttle_ms(r) for r, _ in answers] == [0, 0]
    finally:
        await server.stop()


async def test_the_time_a_handler_waits_is_not_charged() -> None:
    # Charged, the two 300 ms waits would make 64% of the window; the 2 x 20 ms of work
    # make about 4%, more on a loaded machine (the work and the request's decoding take
    # longer in wall time), so the bounds leave room for that and no more.
    server, manager = await serving(30)
    try:
        answers = await ask(server.port, "limited", ApiKey.DESCRIBE_GROUPS, 5,
                            {"groups": [], "include_authorized_operations": False}, 2)
        assert [throttle_ms(r) for r, _ in answers] == [0, 0]
        (rate,) = [s.stat for s in manager.sensors.values()]
        assert 1 < rate.measure(int(time.time() * 1000)) < 30
    finally:
        await server.stop()


async def test_inter_broker_apis_are_exempt() -> None:
    server, manager = await serving(1)
    try:
        answers = await ask(server.port, "limited", ApiKey.BROKER_HEARTBEAT, 1, {
            "broker_id": 1, "broker_epoch": 1, "current_metadata_offset": 0,
            "want_fence": False, "want_shut_down": False, "offline_log_dirs": []}, 2)
        assert [throttle_ms(r) for r, _ in answers] == [0, 0]
        assert manager.sensors == {}
    finally:
        await server.stop()
