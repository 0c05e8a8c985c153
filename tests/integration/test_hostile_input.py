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
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from ottla.protocol.api import ApiKey, request_schema
from ottla.protocol.codec import decode_response, encode_request
from ottla.protocol.errors import ErrorCode
from ottla.protocol.messages import build
from tests.batches import raw_batch, record, record_with_lengths, zstd_bomb
from tests.helpers import OttlaProcess, WireClient, wait_until

PARTITION_EOF = KafkaError._PARTITION_EOF


def _hostile_node(tmp_path_factory: pytest.TempPathFactory, idle_ms: int
                  ) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("hostile") / "data"), overrides={
        "socket.request.max.bytes": str(8 * 1024 * 1024),
        "queued.max.request.bytes": str(16 * 1024 * 1024),
        "connections.max.idle.ms": str(idle_ms),
        "max.connections.per.ip.overrides": "127.0.0.9:2",
    }).start()
    try:
        yield node
    finally:
        code = node.stop()
        assert code in (0, None), f"ottla exited with {code}:\n{node.log()}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OttlaProcess]:
    """One node for the module, with a small request memory pool and short idle limit so
    that those limits show within a test's time."""
    yield from _hostile_node(tmp_path_factory, 3000)


@pytest.fixture
def patient_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OttlaProcess]:
    """The same small pool, with connections.max.idle.ms at its default (10 min): the
    attackers of the pool test hold what they reserved however long a loaded machine
    takes to get to the produce that must wait (with 3 s, the node closed them first in
    a loaded full run, freeing the pool)."""
    yield from _hostile_node(tmp_path_factory, 600_000)


def rss_mb(node: OttlaProcess) -> float:
    """The node's resident memory now (not its peak): tests take it just before a load
    and again after it, in the same process, and bound the difference."""
    assert node.proc is not None
    return psutil.Process(node.proc.pid).memory_info().rss / 2**20


SMALL_REQUEST_MARGIN_MB = 32
"""What handling a few small requests may add to RSS: allocator noise, nothing the
request asked for (2**31 partitions would be GiBs)."""
ANNOUNCERS, ANNOUNCED_MB = 20, 8
ANNOUNCE_MARGIN_MB = ANNOUNCERS * 0.25 + 2 * 1 + SMALL_REQUEST_MARGIN_MB
"""What twenty announcing connections may cost: a 256 KiB read buffer each, a 1 MiB start
of a frame for each of the two the 16 MiB pool lets reserve, and the noise above; the
frames they announce would be 160 MiB."""
BOMB_MARGIN_MB = 64 + SMALL_REQUEST_MARGIN_MB
"""What refusing bombs may cost: one room of max.decompressed.batch.bytes (64 MiB, the
default) if its pages were not yet given back, and the noise above; one bomb expands to
1.25 GiB."""


def closed(sock: socket.socket, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def healthy(node: OttlaProcess) -> None:
    """The node answers another client. The 10 s timeout only tells a node that stopped
    answering from a slow machine; how fast it answers under attack is
    benchmarks/bystander_latency.py's figure."""
    with WireClient(node.bootstrap, timeout=10) as client:
        assert client.api_versions().error_code == ErrorCode.none


def unread_bytes(port: int, peers: list[int]) -> dict[int, int]:
    """For each connection to ``port`` from one of the local ``peers`` ports, the bytes
    that arrived and its owner has not read yet (the kernel's receive queue of the
    accepting side, from /proc/net/tcp)."""
    unread = {}
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote = fields[1].split(":")[1], fields[2].split(":")[1]
            if int(local, 16) == port and int(remote, 16) in peers:
                unread[int(remote, 16)] = int(fields[4].split(":")[1], 16)
    return unread


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
    assert not [line for line in new_lines if "Traceback" in line]
    # At most Kafka's one line for a request it cannot parse (rate-limited per address).
    assert len([line for line in new_lines if "ERROR" in line]) <= 1
    assert all("Closing connection from" in line for line in new_lines if "ERROR" in line)


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
    """Refused before any of it is built: an answer at all (within the client's 10 s;
    2**31 partitions could not be built in that time, nor in the memory bound below),
    nothing created, and the node's RSS, measured just before, grown by no more than the
    handling of one small request and allocator noise could account for."""
    before = rss_mb(node)
    names = [f"huge-{validate_only}", f"fine-{validate_only}"]
    with WireClient(node.bootstrap, timeout=10) as client:
        response = client.request(ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": names[0], "num_partitions": 2**31 - 1,
                        "replication_factor": 1, "assignments": [], "configs": []},
                       {"name": names[1], "num_partitions": 1,
                        "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": validate_only})
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        (names[0], ErrorCode.policy_violation,
         "Excessively large number of partitions per request."),
        (names[1], ErrorCode.policy_violation,
         "Excessively large number of partitions per request.")]
    assert rss_mb(node) - before < SMALL_REQUEST_MARGIN_MB
    with WireClient(node.bootstrap) as client:
        listed = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": name, "topic_id": None} for name in names],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
    assert [t.error_code for t in listed.topics] == [ErrorCode.unknown_topic_or_partition] * 2
    healthy(node)


def test_create_partitions_to_2_31_is_refused_at_once(node) -> None:
    with WireClient(node.bootstrap, timeout=10) as client:
        assert client.create_topic("grow").topics[0].error_code == ErrorCode.none
        response = client.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": "grow", "count": 2**31 - 1, "assignments": None}],
            "timeout": 5000, "validate_only": False})
    assert response.results[0].error_code == ErrorCode.policy_violation
    healthy(node)


def test_clients_announcing_large_frames_wait_for_memory_instead_of_taking_it(
        patient_node: OttlaProcess) -> None:
    """Twenty connections each announce a frame of socket.request.max.bytes (8 MiB) and
    send a little of it: the 16 MiB pool lets two of them reserve, the rest wait, buffers
    grow only with what arrived, and small requests from others are still served."""
    before = rss_mb(patient_node)
    attackers = []
    try:
        for _ in range(ANNOUNCERS):
            sock = socket.create_connection(("127.0.0.1", patient_node.port))
            sock.sendall(struct.pack(">i", ANNOUNCED_MB * 1024 * 1024) + b"\x00" * 1000)
            attackers.append(sock)
        peers = [sock.getsockname()[1] for sock in attackers]

        def announcements_read() -> bool:
            """The node accepted every connection and read at least its 4-byte size."""
            unread = unread_bytes(patient_node.port, peers)
            return len(unread) == ANNOUNCERS and max(unread.values()) <= 1000
        wait_until(announcements_read, 10,
                   message=lambda: f"the node to read every announcement (unread bytes by "
                                   f"port: {unread_bytes(patient_node.port, peers)})")
        healthy(patient_node)
        assert rss_mb(patient_node) - before < ANNOUNCE_MARGIN_MB, \
            "the node buffered what clients only announced"
        # A legitimate large produce waits for the pool while the attackers hold it, and
        # goes through once they are gone.
        with WireClient(patient_node.bootstrap) as client:
            assert client.create_topic("big-frames", configs={
                "max.message.bytes": "5000000"}).topics[0].error_code == ErrorCode.none
        # A linger far longer than the look below keeps the 600 records in one batch until
        # flush sends it, so no early small batch (which needs no pool) gets through.
        producer = Producer({"bootstrap.servers": patient_node.bootstrap, "linger.ms": 60_000,
                             "batch.size": 4_000_000, "message.max.bytes": 5_000_000})
        delivered: list[object] = []
        for _ in range(600):
            producer.produce("big-frames", b"x" * 4000, partition=0,
                             on_delivery=lambda err, msg: delivered.append(err))
        # Nothing may go through while the pool is held: a bounded look (2 s) is the
        # point, there being no event to wait for; the delivery once freed is checked below.
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
            time.sleep(0.2)  # the poll interval of this bounded wait (15 s)
        assert done == {"silent", "half", "trickle"}
        # A lower bound on the idle limit (3 s): only a node closing early fails it.
        assert time.monotonic() - start > 2.5
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


def produce_raw(node: OttlaProcess, topic: str, batch: bytes) -> object:
    with WireClient(node.bootstrap, timeout=30) as client:
        response = client.produce(topic, 0, batch)
    return response.responses[0].partition_responses[0]


def read_all(node: OttlaProcess, topic: str, expect: int) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "check.crcs": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes | None] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == PARTITION_EOF and len(values) >= expect:
                    break
                if msg.error().code() != PARTITION_EOF:
                    raise AssertionError(f"consumer error: {msg.error()}")
                continue
            values.append(msg.value())
    finally:
        consumer.close()
    return values


MALFORMED = {
    "record-longer-than-batch": raw_batch(b"\x7e" + record()[1:], 1),
    "trailing-bytes": raw_batch(record() + b"\x00\x00", 1),
    "fewer-records-than-count": raw_batch(record(), 3),
    "header-count-too-large": raw_batch(bytes([0x10, 0, 0, 0, 0x02, 0x6b, 0x02, 0x76, 0x7e]),
                                        1),
    "offset-deltas-repeat": raw_batch(record(delta=0) + record(delta=0), 2),
    "garbage-zstd": raw_batch(b"\x28\xb5\x2f\xfd" + b"garbage" * 20, 1, codec=4,
                              compressed=True),
    "garbage-gzip": raw_batch(b"\x1f\x8b" + b"garbage" * 20, 1, codec=1, compressed=True),
    "codec-5": raw_batch(record(), 1, attributes=5),
    "codec-6": raw_batch(record(), 1, attributes=6),
    "codec-7": raw_batch(record(), 1, attributes=7),
    # Kafka reads a length below -1 as null and stores the record; librdkafka consumers
    # then stall on the partition. Ottla refuses them (docs/compatibility.md).
    "key-length-below-minus-one": raw_batch(record_with_lengths(-2, 1), 1),
    "value-length-below-minus-one": raw_batch(record_with_lengths(1, -3), 1),
    "header-value-length-below-minus-one": raw_batch(record_with_lengths(1, 1, ((1, -2),)), 1),
    "header-key-length-negative": raw_batch(record_with_lengths(1, 1, ((-1, 1),)), 1),
}


def test_malformed_records_are_refused_and_later_records_stay_readable(node) -> None:
    """Each CRC-valid but malformed batch gets INVALID_RECORD and is not stored; a
    consumer reading the partition afterwards (librdkafka, CRC checks on) gets every
    record produced before and after."""
    with WireClient(node.bootstrap) as client:
        assert client.create_topic("poison").topics[0].error_code == ErrorCode.none
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    expected: list[bytes] = []
    for i, (name, batch) in enumerate(MALFORMED.items()):
        value = f"good-{i}".encode()
        producer.produce("poison", value, partition=0)
        assert producer.flush(10) == 0
        expected.append(value)
        result = produce_raw(node, "poison", batch)
        assert result.error_code == ErrorCode.invalid_record, (name, result)
        assert result.error_message, name
        if "length" in name:  # KIP-467: the record at fault is named
            assert [e.batch_index for e in result.record_errors] == [0], (name, result)
            assert "size" in result.record_errors[0].batch_index_error_message, name
    producer.produce("poison", b"last", partition=0)
    assert producer.flush(10) == 0
    expected.append(b"last")
    assert read_all(node, "poison", len(expected)) == expected


def test_record_errors_name_each_record_at_fault(node) -> None:
    """KIP-467: a compacted topic refuses a batch with null keys, naming each record."""
    with WireClient(node.bootstrap) as client:
        assert client.create_topic("keyed", configs={"cleanup.policy": "compact"}) \
            .topics[0].error_code == ErrorCode.none
    batch = raw_batch(record(key=b"a", delta=0, ts_delta=0) + record(key=None, delta=1) +
                      record(key=None, delta=2), 3, base_ts=int(time.time() * 1000),
                      max_ts=int(time.time() * 1000))
    result = produce_raw(node, "keyed", batch)
    assert result.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in result.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key" in \
        result.record_errors[0].batch_index_error_message


def test_a_compression_bomb_neither_blocks_the_node_nor_is_stored(node) -> None:
    """A zstd batch of about 40 KiB that expands to 1.25 GiB: INVALID_RECORD, other
    clients answered while bombs are in flight (how fast is
    benchmarks/bystander_latency.py's figure), memory not spent on it, nothing stored."""
    bomb = raw_batch(zstd_bomb(1250, 1024 * 1024), 1250, codec=4, compressed=True)
    assert len(bomb) < 100 * 1024
    with WireClient(node.bootstrap) as client:
        assert client.create_topic("bombed").topics[0].error_code == ErrorCode.none
    before = rss_mb(node)
    with WireClient(node.bootstrap, timeout=30) as attacker, \
            WireClient(node.bootstrap, timeout=10) as bystander:
        for _ in range(3):
            correlation_id = attacker.send(ApiKey.PRODUCE, 9, {
                "transactional_id": None, "acks": 1, "timeout": 10000,
                "topic_data": [{"name": "bombed", "partition_data": [
                    {"index": 0, "records": bomb}]}]})
            assert bystander.api_versions().error_code == ErrorCode.none
            response = attacker.receive(ApiKey.PRODUCE, 9, correlation_id)
            result = response.responses[0].partition_responses[0]
            assert result.error_code == ErrorCode.invalid_record
            assert "max.decompressed.batch.bytes" in result.error_message
    assert rss_mb(node) - before < BOMB_MARGIN_MB
    with WireClient(node.bootstrap) as client:
        offsets = client.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": "bombed",
                                                                 "partitions": [{
                "partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert offsets.topics[0].partitions[0].offset == 0  # nothing was stored
