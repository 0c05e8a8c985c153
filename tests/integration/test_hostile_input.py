"""Regression tests for the hostile inputs of issue 16, by class, against a real node:
lengths that lie, null arrays, unknown tagged fields, admin requests for absurd amounts of
work, and clients that announce more memory than they send. The node stays up, answers
everyone else, and keeps its memory within what its settings allow."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import psutil
import pytest
from confluent_kafka import Producer

from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from tests.helpers import OttlaProcess, WireClient, wait_until


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    """One node for the module, with a small request memory pool and short idle limit so
    that those limits show within a test's time."""
    node = OttlaProcess(str(tmp_path_factory.mktemp("hostile") / "data"), overrides={
        "socket.request.max.bytes": str(8 * 1024 * 1024),
        "queued.max.request.bytes": str(16 * 1024 * 1024),
        "connections.max.idle.ms": "3000",
        "max.connections.per.ip.overrides": "127.0.0.9:2",
    }).start()
    try:
        yield node
    finally:
        code = node.stop()
        assert code in (0, None), f"ottla exited with {code}:\n{node.log()}"


def rss_mb(node: OttlaProcess) -> float:
    assert node.proc is not None
    return psutil.Process(node.proc.pid).memory_info().rss / 2**20


def closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def healthy(node: OttlaProcess, within_s: float = 2.0) -> None:
    start = time.monotonic()
    with WireClient(node.bootstrap, timeout=within_s) as client:
        assert client.api_versions().error_code == ErrorCode.none
    assert time.monotonic() - start < within_s


def raw(api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
    payload = struct.pack(">hhih", api_key, version, 1, -1) + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(payload) + len(body)) + payload + body


def test_a_20_byte_request_declaring_4_billion_topics_closes_only_its_connection(node
                                                                                 ) -> None:
    frame = raw(ApiKey.METADATA, 12, b"\xff\xff\xff\xff\x0f", flexible=True)
    assert len(frame) == 20
    with socket.create_connection(("127.0.0.1", node.port)) as attacker:
        attacker.sendall(frame)
        assert closed(attacker)
    healthy(node)


def test_a_null_array_forwarded_to_the_controller_is_refused_once(node) -> None:
    """DeleteTopics v1 with a null topic array used to reach the controller's handler,
    which failed, and the broker retried it 20 times a second."""
    lines_before = node.log().count("\n")
    with socket.create_connection(("127.0.0.1", node.port)) as attacker:
        attacker.sendall(raw(ApiKey.DELETE_TOPICS, 1, struct.pack(">ii", -1, 5000), False))
        assert closed(attacker, timeout=5)
    healthy(node)
    new_lines = node.log().splitlines()[lines_before:]
    assert not [line for line in new_lines if "Traceback" in line or "ERROR" in line]


@pytest.mark.parametrize("api_key,version", [(ApiKey.API_VERSIONS, 3),
                                             (ApiKey.METADATA, 12), (ApiKey.FETCH, 12)])
def test_unknown_tagged_fields_are_skipped(node, api_key: int, version: int) -> None:
    bodies = {
        ApiKey.API_VERSIONS: {"client_software_name": "x", "client_software_version": "1"},
        ApiKey.METADATA: {"topics": None, "allow_auto_topic_creation": False,
                          "include_topic_authorized_operations": False},
        ApiKey.FETCH: {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1024,
                       "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                       "topics": [], "forgotten_topics_data": [], "rack_id": ""},
    }
    frame = encode_request(api_key, version, 5, "newer-client",
                           build(request_schema(api_key, version), bodies[api_key]))
    assert frame.endswith(b"\x00")  # no tagged fields in the body
    unknown = b"\x02" + b"\x63\x03abc" + b"\x64\x00"  # tags 99 and 100
    body = frame[4:-1] + unknown
    with WireClient(node.bootstrap) as client:
        client.send_raw(struct.pack(">i", len(body)) + body)
        correlation_id, response = decode_response(api_key, version, client.recv_frame())
    assert correlation_id == 5
    assert getattr(response, "error_code", ErrorCode.none) == ErrorCode.none


@pytest.mark.parametrize("validate_only", [True, False])
def test_create_topics_for_2_31_partitions_is_refused_at_once(node, validate_only: bool
                                                             ) -> None:
    before = rss_mb(node)
    start = time.monotonic()
    with WireClient(node.bootstrap, timeout=10) as client:
        response = client.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": f"huge-{validate_only}", "num_partitions": 2**31 - 1,
                        "replication_factor": 1, "assignments": [], "configs": []},
                       {"name": f"fine-{validate_only}", "num_partitions": 1,
                        "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": validate_only})
    assert time.monotonic() - start < 5
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        (f"huge-{validate_only}", ErrorCode.policy_violation,
         "Unable to perform excessively large batch operation."),
        (f"fine-{validate_only}", ErrorCode.policy_violation,
         "Unable to perform excessively large batch operation.")]
    assert rss_mb(node) - before < 50
    healthy(node)


def test_create_partitions_to_2_31_is_refused_at_once(node) -> None:
    with WireClient(node.bootstrap, timeout=10) as client:
        assert client.create_topic("grow").topics[0].error_code == ErrorCode.none
        response = client.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": "grow", "count": 2**31 - 1, "assignments": None}],
            "timeout": 5000, "validate_only": False})
    assert response.results[0].error_code == ErrorCode.policy_violation
    healthy(node)


def test_clients_announcing_large_frames_wait_for_memory_instead_of_taking_it(node
                                                                              ) -> None:
    """Twenty connections each announce a frame of socket.request.max.bytes (8 MiB) and
    send a little of it: the 16 MiB pool lets two of them reserve, the rest wait, buffers
    grow only with what arrived, and small requests from others are still served."""
    before = rss_mb(node)
    attackers = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", node.port))
            sock.sendall(struct.pack(">i", 8 * 1024 * 1024) + b"\x00" * 1000)
            attackers.append(sock)
        time.sleep(0.5)
        healthy(node)
        assert rss_mb(node) - before < 40, "the node buffered what clients only announced"
        # A legitimate large produce waits for the pool while the attackers hold it, and
        # goes through once they are gone.
        with WireClient(node.bootstrap) as client:
            assert client.create_topic("big-frames", configs={
                "max.message.bytes": "5000000"}).topics[0].error_code == ErrorCode.none
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 50,
                             "batch.size": 4_000_000, "message.max.bytes": 5_000_000})
        delivered: list[object] = []
        for _ in range(600):
            producer.produce("big-frames", b"x" * 4000, partition=0,
                             on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(2)
        assert delivered == [], "a frame larger than the read buffer skipped the pool"
        for sock in attackers:
            sock.close()
        attackers.clear()
        assert producer.flush(30) == 0
        assert delivered == [None] * 600
    finally:
        for sock in attackers:
            sock.close()


def test_idle_and_half_sent_connections_are_closed(node) -> None:
    """connections.max.idle.ms=3000: silent connections, ones that stopped halfway
    through a frame, and ones that trickle a frame a byte at a time all go."""
    with socket.create_connection(("127.0.0.1", node.port)) as silent, \
            socket.create_connection(("127.0.0.1", node.port)) as half, \
            socket.create_connection(("127.0.0.1", node.port)) as trickle:
        half.sendall(struct.pack(">i", 100) + b"\x00\x12")
        trickle.sendall(struct.pack(">i", 1000))
        start = time.monotonic()
        deadline = start + 15
        done = set()
        trickle.setblocking(False)
        while len(done) < 3 and time.monotonic() < deadline:
            for name, sock in (("silent", silent), ("half", half)):
                if name not in done and closed(sock, timeout=0.1):
                    done.add(name)
            if "trickle" not in done:
                try:
                    trickle.send(b"\x00")
                    if trickle.recv(1) == b"":
                        done.add("trickle")
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    done.add("trickle")
            time.sleep(0.2)
        assert done == {"silent", "half", "trickle"}
        assert time.monotonic() - start > 2.5  # not before the limit
    healthy(node)


def test_connections_over_the_per_address_limit_are_closed(node) -> None:
    """max.connections.per.ip.overrides=127.0.0.9:2: a third connection from that
    address is closed at once; other addresses are not limited."""
    socks = []
    try:
        for _ in range(3):
            sock = socket.socket()
            sock.bind(("127.0.0.9", 0))
            sock.connect(("127.0.0.1", node.port))
            socks.append(sock)
        assert closed(socks[2], timeout=5)
        with WireClient(node.bootstrap) as client:
            assert client.api_versions().error_code == ErrorCode.none
        socks[0].sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "x", build(
            request_schema(ApiKey.API_VERSIONS, 0), {})))
        socks[0].settimeout(5)
        assert len(socks[0].recv(4)) == 4  # the first two are served
    finally:
        for sock in socks:
            sock.close()
    wait_until(lambda: healthy(node) is None, 5)
