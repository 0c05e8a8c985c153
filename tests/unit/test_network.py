"""The network layer's answers to handlers that fail, and the forwarding of requests to
the controller: an error response, never a dropped connection or a retry loop."""

from __future__ import annotations

import asyncio
import gc
import logging
import struct
import warnings
from typing import Any

from ottla.client.async_client import NodeUnavailable
from ottla.common.principal import Principal, deserialize_principal
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import decode_response, encode_body, encode_request
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.messages import build
from ottla.protocol.requests import ApiSpec, ApiTable, CloseConnection
from ottla.server import controller_channel
from ottla.server.controller_channel import ControllerChannel
from ottla.server.network import KafkaConnection, KafkaServer
from ottla.server.request_dispatcher import RequestDispatcher

METADATA_V12 = {"topics": [{"name": "a", "topic_id": None}, {"name": "b", "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}


def failing(broker: Any, ctx: Any, req: Any) -> Any:
    raise TypeError("'NoneType' object is not iterable")


async def refusing(broker: Any, ctx: Any, req: Any) -> Any:
    await asyncio.sleep(0)
    raise KafkaError(ErrorCode.group_authorization_failed, "no")


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int,
              version: int, body: dict[str, Any], correlation: int) -> Any:
    writer.write(encode_request(api_key, version, correlation, "t",
                                build(request_schema(api_key, version), body)))
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    got, response = decode_response(api_key, version, await reader.readexactly(size))
    assert got == correlation
    return response


async def test_failed_handlers_are_answered_and_logged_once(caplog) -> None:
    table = ApiTable("broker", None, [ApiSpec(ApiKey.METADATA, 0, 12, failing),
                                      ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, refusing)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        with caplog.at_level(logging.ERROR, logger="ottla.server.network"):
            for i in range(5):
                response = await ask(reader, writer, ApiKey.METADATA, 12, METADATA_V12, i)
                assert [(t.name, t.error_code) for t in response.topics] == [
                    ("a", ErrorCode.unknown_server_error),
                    ("b", ErrorCode.unknown_server_error)]
        assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1
        described = await ask(reader, writer, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": ["g"], "include_authorized_operations": False}, 9)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("g", ErrorCode.group_authorization_failed)]
    finally:
        writer.close()
        await server.stop()


class Raft:
    leader_id = 1


class Envelopes:
    """Stands in for the AsyncClient to a controller: answers envelopes from a script."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[float] = []

    async def request(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        self.calls.append(asyncio.get_running_loop().time())
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Envelope:
    def __init__(self, error: ErrorCode, data: bytes | None = None) -> None:
        self.error_code = error
        self.response_data = data


class Context:
    class header:
        api_key = ApiKey.DELETE_TOPICS
        api_version = 6
    client_id = "c"
    principal = Principal("User", "alice")
    client_host = "10.1.2.3"


def channel(answers: list[Any]) -> tuple[ControllerChannel, Envelopes]:
    ch = ControllerChannel(101, Raft(), None, {1: ("127.0.0.1", 1)})  # type: ignore[arg-type]
    client = Envelopes(answers)
    ch._clients[1] = client  # type: ignore[assignment]
    return ch, client


DELETE = build(request_schema(ApiKey.DELETE_TOPICS, 6), {
    "topics": [{"name": "t", "topic_id": None}], "timeout": 1000})


async def test_a_refused_envelope_is_an_unknown_server_error_for_the_client() -> None:
    """As Kafka's ForwardingManager: an error of the envelope itself (this broker lacks
    CLUSTER_ACTION, the controller could not read the request) is the brokers' fault,
    not the client's."""
    for error in (ErrorCode.invalid_request, ErrorCode.cluster_authorization_failed):
        ch, client = channel([Envelope(error)])
        response = await ch.forward(Context(), DELETE, timeout=5)
        assert len(client.calls) == 1  # not retried
        assert response["responses"][0]["name"] == "t"
        assert response["responses"][0]["error_code"] == ErrorCode.unknown_server_error


async def test_a_forwarded_request_carries_the_clients_principal_and_address() -> None:
    inner = build(response_schema(ApiKey.DELETE_TOPICS, 6),
                  {"throttle_time": 0, "responses": []})
    data = struct.pack(">i", 0) + b"\x00" + encode_body(inner)
    ch, client = channel([Envelope(ErrorCode.none, data)])
    sent: list[Any] = []
    original = client.request

    async def request(api_key: int, version: int, body: Any, timeout: float) -> Any:
        sent.append(body)
        return await original(api_key, version, body, timeout)
    client.request = request  # type: ignore[method-assign]
    await ch.forward(Context(), DELETE, timeout=5)
    (envelope,) = sent
    assert deserialize_principal(envelope["request_principal"]) == Principal("User", "alice")
    assert envelope["client_host_address"] == bytes([10, 1, 2, 3])


async def test_only_an_absent_or_inactive_controller_is_retried_with_backoff(monkeypatch
                                                                            ) -> None:
    monkeypatch.setattr(controller_channel, "RETRY_BACKOFF_S", 0.01)
    monkeypatch.setattr(controller_channel, "RETRY_BACKOFF_MAX_S", 0.04)
    inner = build(response_schema(ApiKey.DELETE_TOPICS, 6),
                  {"throttle_time": 0, "responses": []})
    data = struct.pack(">i", 0) + b"\x00" + encode_body(inner)
    ch, client = channel([NodeUnavailable("down"), Envelope(ErrorCode.not_controller),
                          NodeUnavailable("down"), Envelope(ErrorCode.not_controller),
                          Envelope(ErrorCode.none, data)])
    response = await ch.forward(Context(), DELETE, timeout=5)
    assert response.responses == ()
    gaps = [b - a for a, b in zip(client.calls, client.calls[1:])]
    assert len(gaps) == 4
    assert gaps[0] >= 0.009 and gaps[2] >= 0.039 and gaps[3] >= 0.039  # doubled, capped


async def test_a_version_the_controller_does_not_serve_closes_the_clients_connection(
        ) -> None:
    """As Kafka's forwarding: the client reconnects and asks ApiVersions again."""
    ch, client = channel([Envelope(ErrorCode.unsupported_version)])
    try:
        await ch.forward(Context(), DELETE, timeout=5)
    except CloseConnection:
        pass
    else:
        raise AssertionError("the connection was kept")
    assert len(client.calls) == 1


async def test_a_throttled_request_is_answered_then_its_connection_muted() -> None:
    """KIP-219: the answer to a request over a quota goes out at once; the next request
    on that connection (already sent, pipelined) is read only once the throttle ends,
    while another connection is served meanwhile."""
    handled: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()

    def handler(services: Any, ctx: Any, req: Any) -> Any:
        handled.append((ctx.client_id, loop.time()))
        if ctx.header.correlation_id == 1:
            ctx.throttle_ms = 300
        return {"throttle_time": ctx.throttle_ms, "error_code": 0, "groups": []}

    async def slow(services: Any, ctx: Any, req: Any) -> Any:
        await asyncio.sleep(0)
        ctx.throttle_ms = 200
        return handler(services, ctx, req)

    table = ApiTable("broker", None, [ApiSpec(ApiKey.LIST_GROUPS, 0, 5, handler),
                                      ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, slow)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    other_reader, other_writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        body = build(request_schema(ApiKey.LIST_GROUPS, 5), {"states_filter": [],
                                                              "types_filter": []})
        writer.write(encode_request(ApiKey.LIST_GROUPS, 5, 1, "muted", body) +
                     encode_request(ApiKey.LIST_GROUPS, 5, 2, "muted", body))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        first = decode_response(ApiKey.LIST_GROUPS, 5, await reader.readexactly(size))
        answered = loop.time()
        assert first[0] == 1 and first[1].throttle_time.total_seconds() == 0.3
        assert (await ask(other_reader, other_writer, ApiKey.LIST_GROUPS, 5,
                          {"states_filter": [], "types_filter": []}, 7)).error_code == 0
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        assert decode_response(ApiKey.LIST_GROUPS, 5, await reader.readexactly(size))[0] == 2
        second_handled = [t for client, t in handled if client == "muted"][1]
        assert second_handled - answered >= 0.29
        # A handler that waited mutes its connection too.
        start = loop.time()
        await ask(reader, writer, ApiKey.DESCRIBE_GROUPS, 5, {
            "groups": [], "include_authorized_operations": False}, 3)
        await ask(reader, writer, ApiKey.LIST_GROUPS, 5,
                  {"states_filter": [], "types_filter": []}, 4)
        assert loop.time() - start >= 0.19
    finally:
        writer.close()
        other_writer.close()
        await server.stop()


class _Transport(asyncio.Transport):
    """Enough of a socket transport for a connection that is cut at once."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def test_a_request_cut_off_with_its_connection_leaves_no_handler_unawaited() -> None:
    """The raft peers' links drop often (a fault proxy, a killed node): a request read just
    before its connection is lost is dropped with it, and its handler closed, not left
    for the garbage collector to warn about."""
    ran: list[int] = []

    async def handler(broker: Any, ctx: Any, req: Any) -> Any:
        ran.append(1)
        return {"groups": []}

    table = ApiTable("broker", None, [ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 5, handler)])
    server = KafkaServer(RequestDispatcher(table), "PLAINTEXT", "127.0.0.1", 0, 1 << 20)
    connection = KafkaConnection(server)
    connection.connection_made(_Transport())
    body = encode_request(ApiKey.DESCRIBE_GROUPS, 5, 1, "t", build(
        request_schema(ApiKey.DESCRIBE_GROUPS, 5),
        {"groups": ["g"], "include_authorized_operations": False}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        buffer = connection.get_buffer(len(body))
        buffer[:len(body)] = body
        connection.buffer_updated(len(body))
        connection.connection_lost(None)
        await asyncio.sleep(0)
        del connection, server
        gc.collect()
    assert ran == []
    assert not [w for w in caught if "never awaited" in str(w.message)]
