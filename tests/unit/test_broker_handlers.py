"""The broker-role request handlers (``ottla.broker.handlers``), called directly.

Each test builds a real ``Broker`` in-process over a temporary directory: a real
``LogManager`` and ``ReplicaManager``, and a ``MetadataImage`` whose brokers and topics
come from replaying metadata records, as a node's metadata publisher would. Requests are
kio entities built with ``messages.build``; every response goes through the same steps the
request dispatcher takes (a dict is built into the response schema, an ``EncodedBody``
from Produce and Fetch is sent as it is) and is decoded back from its bytes, so the
assertions are on what a client would read.

Covered: Produce, Fetch (including long polling, and followers' fetches), ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, DescribeLogDirs, Metadata (with auto topic
creation), DescribeCluster, DescribeConfigs, InitProducerId, DescribeProducers,
DescribeTransactions and ListTransactions, the
requests forwarded to the controller, and the group APIs on a real
``GroupCoordinatorService``.

The controller is the one fake (``FakeController``): it is another role of the node,
reached over the network in a real deployment; here it records what the broker asked of
it and answers with canned responses.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from ottla.broker.broker import Broker
from ottla.broker.coordinators.group_coordinator import GroupCoordinatorService
from ottla.broker.coordinators.transaction_coordinator import TransactionCoordinatorService
from ottla.broker.deadline_timer import monotonic_ms
from ottla.broker.handlers import (
    broker_apis,
    configs,
    fetch,
    forwarding,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    produce,
    producer,
    share,
    transaction_admin,
    transactions,
)
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.common.server_config import KafkaConfig, dev_defaults
from ottla.common.topics import OFFSETS_TOPIC
from ottla.coordinator.share.state import SharePartitionKey
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.api import ApiKey, request_schema, response_schema
from ottla.protocol.codec import (
    RequestHeader,
    decode_response,
    encode_body_chunks,
    response_header_bytes,
)
from ottla.protocol.compression import CompressionType
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.fetch_response import EncodedBody
from ottla.protocol.messages import build
from ottla.protocol.records import build_batch, decode_records, scan_batches
from ottla.protocol.requests import NO_RESPONSE, ApiTable, CloseConnection, RequestContext
from ottla.server.api_versions import api_versions
from ottla.storage.log_manager import LogManager
from ottla.storage.segment import FileSlice

NODE = 1
OTHER = 2
CLUSTER_ID = "handler-test-cluster"
LISTENER = "PLAINTEXT"
HOST, PORT = "127.0.0.1", 9092
NOW_MS = 1_700_000_000_000


def clock() -> float:
    """The fixed clock of the broker and of every request."""
    return NOW_MS / 1000


SPECS = {spec.api_key: spec
         for module in (produce, fetch, list_offsets, log_dirs, metadata, configs, producer,
                        groups, transactions, transaction_admin, share, forwarding)
         for spec in module.APIS}


# --- the controller ----------------------------------------------------------------------

class FakeController:
    """Stands in for the node's ``ControllerChannel``. The active controller is another
    role of the node, reached over the network (Envelope requests); a unit test has no
    quorum to run it, so this records what the broker asks and answers with canned
    responses, built into the real response schemas as the channel would return them."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, Any]] = []
        self.forwarded: list[tuple[RequestContext, Any]] = []
        self.answers: dict[int, dict[str, Any]] = {}
        """The canned response body (a dict) per api key for ``call``."""
        self.forward_answer: Any = None
        self.on_call: Any = None
        """Run on each ``call`` before answering (e.g. to replay what it created)."""

    async def call(self, api_key: int, version: int, body: Any, timeout: float = 30.0,
                   client_id: str | None = None, **on_behalf_of: Any) -> Any:
        self.calls.append((api_key, version, body))
        if self.on_call is not None:
            self.on_call(api_key, body)
        return build(response_schema(api_key, version), self.answers[api_key])

    async def forward(self, ctx: RequestContext, request: Any, timeout: float = 30.0) -> Any:
        self.forwarded.append((ctx, request))
        return self.forward_answer


# --- the broker -----------------------------------------------------------------------------

def register_broker(image: MetadataImage, broker_id: int, port: int, fenced: bool = False
                    ) -> None:
    image.replay(r.RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id), broker_epoch=10,
        end_points=(r.BrokerEndpoint(name=LISTENER, host=HOST, port=port,
                                     security_protocol=0),),
        rack=None, fenced=fenced))


@pytest.fixture
def broker(tmp_path, request) -> Iterator[Broker]:
    """A broker whose coordinators' topics have one partition (indirect parametrization
    with a dict of configs overrides them)."""
    config = KafkaConfig({**dev_defaults(), "log.dirs": str(tmp_path / "logs"),
                          "offsets.topic.num.partitions": "1",
                          "transaction.state.log.num.partitions": "1",
                          "share.coordinator.state.topic.num.partitions": "1",
                          **{key: value.format(tmp=tmp_path)
                             for key, value in getattr(request, "param", {}).items()}})
    image = MetadataImage()
    register_broker(image, NODE, PORT)
    # As a cluster bootstraps: consumer and share groups on (group.version 1,
    # share.version 1).
    image.replay(r.FeatureLevelRecord(name="group.version", feature_level=1))
    image.replay(r.FeatureLevelRecord(name="share.version", feature_level=1))
    logs = LogManager(config.log_dirs, NOW_MS)
    logs.discover()
    logs.started()
    replicas = ReplicaManager(NODE, logs, lambda img: config.topic_defaults(
        {**img.broker_configs(None), **img.broker_configs(NODE)}))
    b = Broker(node_id=NODE, cluster_id=CLUSTER_ID, config=config, image=image,
               replica_manager=replicas, controller=FakeController(), clock=clock)
    b.broker_epoch = 10
    yield b
    b.shutdown()  # answers what is parked in the purgatories, cancels the timers
    logs.shutdown()


def controller_of(broker: Broker) -> FakeController:
    assert isinstance(broker.controller, FakeController)
    return broker.controller


def create_topic(broker: Broker, name: str, partitions: int = 1, leader: int = NODE,
                 configs: dict[str, str] | None = None,
                 replicas: tuple[int, ...] | None = None, topic_id: uuid.UUID | None = None
                 ) -> uuid.UUID:
    """Replay a topic's records into the image and open its logs, as the node does when
    the metadata publisher applies committed records."""
    topic_id = topic_id or uuid.uuid4()
    broker.image.replay(r.TopicRecord(name=name, topic_id=topic_id))
    for index in range(partitions):
        broker.image.replay(r.PartitionRecord(
            partition_id=index, topic_id=topic_id, replicas=replicas or (leader,),
            isr=replicas or (leader,), leader=leader, leader_epoch=0, partition_epoch=0))
    for key, value in (configs or {}).items():
        broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.TOPIC,
                                           resource_name=name, name=key, value=value))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    return topic_id


# --- requests and responses ------------------------------------------------------------

def context(api_key: int, version: int) -> RequestContext:
    header = RequestHeader(api_key, version, 17, "handler-tests", 0)
    return RequestContext(header, LISTENER, "broker", "10.0.0.9", 50000, clock=clock)


def handle(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """What the handler serving ``api_key`` returns for this request, not awaited."""
    spec = SPECS[api_key]
    assert spec.min_version <= version <= spec.max_version
    request = build(request_schema(api_key, version), body)
    return spec.handler(broker, context(api_key, version), request)


async def raw_call(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """What the handler serving ``api_key`` answers (awaited) for this request."""
    response = handle(broker, api_key, version, body)
    if inspect.isawaitable(response):
        response = await response
    return response


def joined(chunks: list[Any]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in chunks)


def decoded(api_key: int, version: int, response: Any) -> Any:
    """The response as a client reads it: encoded as the dispatcher does, then decoded."""
    if type(response) is EncodedBody:
        chunks, size = response.chunks, response.size
    else:
        if isinstance(response, dict):
            response = build(response_schema(api_key, version), response)
        chunks, size = encode_body_chunks(response)
    body = joined(chunks)
    assert len(body) == size
    frame = response_header_bytes(api_key, version, 17, size)[4:] + body
    correlation_id, body = decode_response(api_key, version, frame)
    assert correlation_id == 17
    return body


async def ask(broker: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return decoded(api_key, version, await raw_call(broker, api_key, version, body))


def batch(*values: bytes, timestamp: int = NOW_MS, **kwargs: Any) -> bytes:
    return build_batch([(b"k-" + v, v) for v in values], timestamp=timestamp, **kwargs)


def produce_body(topic: str, *partitions: tuple[int, bytes | None], acks: int = -1,
                 transactional_id: str | None = None, timeout_ms: int = 30000
                 ) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": index, "records": records} for index, records in partitions]}]}


async def produce_ok(broker: Broker, topic: str, index: int, records: bytes) -> int:
    """Produce one batch through the handler; its base offset."""
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body(topic, (index, records)))
    (p,) = response.responses[0].partition_responses
    assert p.error_code == ErrorCode.none, p.error_message
    return p.base_offset


def partition_answer(response: Any) -> Any:
    (topic,) = response.responses
    (p,) = topic.partition_responses
    return p


def log_end(broker: Broker, topic: str, index: int = 0) -> int:
    return broker.replica_manager.partitions[(topic, index)].log.log_end_offset


def values_of(records: bytes) -> list[tuple[int, bytes | None]]:
    return [(rec.offset, rec.value) for pos, header in scan_batches(records)
            for rec in decode_records(records, pos, header)]


# --- Produce -------------------------------------------------------------------------------

async def test_produce_appends_a_batch_and_answers_its_base_offset(broker) -> None:
    create_topic(broker, "orders")
    first = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a", b"b", b"c")))))
    second = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"d", b"e")))))
    assert (first.error_code, first.base_offset, first.log_start_offset) == \
        (ErrorCode.none, 0, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
    assert log_end(broker, "orders") == 5


async def test_produce_to_an_unknown_topic_or_partition_is_refused(broker) -> None:
    create_topic(broker, "orders")
    response = await ask(broker, ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 1, "timeout": 30000, "topic_data": [
            {"name": "nope", "partition_data": [{"index": 0, "records": batch(b"x")}]},
            {"name": "orders", "partition_data": [{"index": 7, "records": batch(b"x")}]}]})
    answers = {(t.name, p.index): (p.error_code, p.base_offset)
               for t in response.responses for p in t.partition_responses}
    assert answers == {("nope", 0): (ErrorCode.unknown_topic_or_partition, -1),
                       ("orders", 7): (ErrorCode.unknown_topic_or_partition, -1)}


async def test_a_refused_append_tells_the_partitions_log_start(broker) -> None:
    """Kafka's processFailedRecord: an append refused by the log (here a sequence gap)
    carries the partition's log start offset; an unknown partition carries -1."""
    create_topic(broker, "orders")
    idempotent = {"producer_id": 9, "producer_epoch": 0}
    assert partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a", base_sequence=0, **idempotent))))).error_code == \
        ErrorCode.none
    gap = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"b", base_sequence=5, **idempotent)))))
    assert (gap.error_code, gap.base_offset, gap.log_start_offset) == (
        ErrorCode.out_of_order_sequence_number, -1, 0)
    unknown = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (7, batch(b"c")))))
    assert (unknown.error_code, unknown.log_start_offset) == (
        ErrorCode.unknown_topic_or_partition, -1)


async def test_produce_by_unknown_topic_id_answers_unknown_topic_id(broker) -> None:
    unknown = uuid.uuid4()
    response = await ask(broker, ApiKey.PRODUCE, 13, {
        "transactional_id": None, "acks": -1, "timeout": 30000, "topic_data": [
            {"topic_id": unknown, "partition_data": [{"index": 0, "records": batch(b"x")}]}]})
    (topic,) = response.responses
    assert topic.topic_id == unknown
    assert topic.partition_responses[0].error_code == ErrorCode.unknown_topic_id


async def test_produce_to_an_internal_topic_is_refused(broker) -> None:
    create_topic(broker, OFFSETS_TOPIC)
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        OFFSETS_TOPIC, (0, batch(b"forged")))))
    assert p.error_code == ErrorCode.invalid_topic_exception
    assert log_end(broker, OFFSETS_TOPIC) == 0


async def test_produce_with_invalid_acks_is_refused(broker) -> None:
    create_topic(broker, "orders")
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a")), acks=5)))
    assert (p.error_code, p.base_offset) == (ErrorCode.invalid_required_acks, -1)
    assert log_end(broker, "orders") == 0


async def test_produce_of_a_malformed_batch_answers_invalid_record_with_record_errors(
        broker) -> None:
    create_topic(broker, "orders")
    # The second record's offset delta repeats the first's; the batch is otherwise sound
    # (its CRC and counts agree), so only the record walk can find it.
    bad = batch(b"a", b"b", b"c", offset_deltas=[0, 0, 2])
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, bad))))
    assert p.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in p.record_errors] == [1]
    assert p.error_message and "offset delta" in p.error_message
    assert p.log_start_offset == 0  # as Kafka's processFailedRecord
    assert log_end(broker, "orders") == 0


async def test_produce_without_a_key_to_a_compacted_topic_names_each_record(broker) -> None:
    create_topic(broker, "compacted", configs={"cleanup.policy": "compact"})
    records = build_batch([(b"k", b"1"), (None, b"2"), (b"k", b"3"), (None, b"4")],
                          timestamp=NOW_MS)
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "compacted", (0, records))))
    assert p.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in p.record_errors] == [1, 3]
    assert log_end(broker, "compacted") == 0


async def test_produce_of_a_compressed_record_over_max_decompressed_message_bytes(
        broker) -> None:
    """As Kafka 4.4 (the oracle's produce-max-decompressed-message-bytes): the topic's
    max.decompressed.message.bytes bounds each record of a compressed batch; a longer one
    is INVALID_RECORD with no message and no record errors, and, as every error of the
    append but a few, the partition's log start offset. Uncompressed, it is accepted."""
    create_topic(broker, "orders", configs={"max.decompressed.message.bytes": "300"})
    records = [(b"k", b"small"), (b"k", b"x" * 1000)]
    gzip = build_batch(records, timestamp=NOW_MS, compression=CompressionType.GZIP)
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, gzip))))
    assert (p.error_code, p.error_message, list(p.record_errors), p.log_start_offset) == (
        ErrorCode.invalid_record, None, [], 0)
    plain = build_batch(records, timestamp=NOW_MS)
    p = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, plain))))
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)


async def test_produce_with_acks_zero_gets_no_response_or_closes_on_failure(broker) -> None:
    create_topic(broker, "orders")
    ok = await raw_call(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a", b"b")), acks=0))
    assert ok is NO_RESPONSE
    assert log_end(broker, "orders") == 2
    with pytest.raises(CloseConnection):
        await raw_call(broker, ApiKey.PRODUCE, 9, produce_body(
            "missing", (0, batch(b"a")), acks=0))


# --- acks=all and the produce purgatory ---------------------------------------------------
# A partition with three replicas: the two followers are brokers this test plays by
# reporting their fetch positions, as the Fetch handler will for real followers.

THIRD = 3


async def test_acks_all_waits_until_every_in_sync_replica_has_the_records(broker) -> None:
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    replicas = broker.replica_manager
    partition = replicas.partitions[("orders", 0)]
    pending = asyncio.ensure_future(raw_call(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a", b"b")))))
    await asyncio.sleep(0)  # the handler appends and parks
    assert log_end(broker, "orders") == 2 and not pending.done()
    assert replicas.produce_purgatory.watched(("orders", 0)) == 1
    replicas.update_follower_fetch(partition, OTHER, 2, NOW_MS)
    await asyncio.sleep(0)
    assert not pending.done() and partition.high_watermark == 0
    replicas.update_follower_fetch(partition, THIRD, 2, NOW_MS)
    answer = partition_answer(decoded(ApiKey.PRODUCE, 9, await asyncio.wait_for(pending, 5)))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)
    assert partition.high_watermark == 2


async def test_acks_all_not_replicated_in_time_answers_request_timed_out(broker) -> None:
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    # The purgatory times out on the monotonic clock: a stand-in for it, from now.
    start = monotonic_ms()
    clock = [start]
    broker.replica_manager.produce_purgatory.timer_ms = lambda: clock[0]
    pending = asyncio.ensure_future(raw_call(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a")), timeout_ms=1500)))
    await asyncio.sleep(0)
    clock[0] = start + 1499
    assert broker.replica_manager.expire_delayed(NOW_MS + 1499) == start + 1500
    assert not pending.done()
    clock[0] = start + 1500
    assert broker.replica_manager.expire_delayed(NOW_MS + 1500) is None
    answer = partition_answer(decoded(ApiKey.PRODUCE, 9, await asyncio.wait_for(pending, 5)))
    assert answer.error_code == ErrorCode.request_timed_out
    assert answer.base_offset == 0  # written by the leader, not acknowledged by the ISR


async def test_acks_all_whose_leadership_moves_answers_not_leader_or_follower(broker) -> None:
    topic_id = create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    pending = asyncio.ensure_future(raw_call(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a")))))
    await asyncio.sleep(0)
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=OTHER, isr=(OTHER, THIRD)))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    answer = partition_answer(decoded(ApiKey.PRODUCE, 9, await asyncio.wait_for(pending, 5)))
    assert answer.error_code == ErrorCode.not_leader_or_follower


async def test_a_step_of_the_leaders_wall_clock_moves_no_follower_in_or_out_of_the_isr(
        broker) -> None:
    """Followers' lag (replica.lag.time.max.ms) is timed on the monotonic clock: a
    leader whose wall clock jumps ten minutes ahead drops no follower that keeps up, and
    one whose clock jumps ten minutes back still drops the follower that stopped."""
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    replicas = broker.replica_manager
    partition = replicas.partitions[("orders", 0)]
    proposed: list[list[int]] = []
    replicas.alter_isr = lambda _, isr: proposed.append(sorted(isr))
    start = monotonic_ms()
    clock = [start]
    replicas.lag_clock = lambda: clock[0]
    for expected_end in (1, 2):
        answer = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
            "orders", (0, batch(b"a")), acks=1)))
        assert answer.error_code == ErrorCode.none
        replicas.update_follower_fetch(partition, OTHER, expected_end, NOW_MS)
    replicas.update_follower_fetch(partition, THIRD, 1, NOW_MS)  # then it stops
    clock[0] = start + 20_000
    replicas.maybe_shrink_isr(NOW_MS + 600_000, 30_000)
    assert proposed == []
    clock[0] = start + 30_001
    replicas.maybe_shrink_isr(NOW_MS - 600_000, 30_000)
    assert proposed == [[NODE, OTHER]]


async def test_acks_one_answers_after_the_leader_append_alone(broker) -> None:
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    answer = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a")), acks=1)))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)
    assert broker.replica_manager.produce_purgatory.watched() == 0


async def test_acks_all_below_min_insync_replicas_is_refused_before_the_append(
        broker) -> None:
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD),
                 configs={"min.insync.replicas": "4"})
    answer = partition_answer(await ask(broker, ApiKey.PRODUCE, 9, produce_body(
        "orders", (0, batch(b"a")))))
    assert answer.error_code == ErrorCode.not_enough_replicas
    assert log_end(broker, "orders") == 0


async def test_a_consumer_fetch_stops_at_the_high_watermark(broker) -> None:
    create_topic(broker, "orders", replicas=(NODE, OTHER, THIRD))
    partition = broker.replica_manager.partitions[("orders", 0)]
    broker.replica_manager.append(partition, batch(b"a"), 1, NOW_MS)
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20))))
    assert (parts[0].high_watermark, values_of(parts[0].records or b"")) == (0, [])
    broker.replica_manager.update_follower_fetch(partition, OTHER, 1, NOW_MS)
    broker.replica_manager.update_follower_fetch(partition, THIRD, 1, NOW_MS)
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20))))
    assert parts[0].high_watermark == 1 and values_of(parts[0].records) == [(0, b"a")]


# --- Fetch ------------------------------------------------------------------------------

def fetch_body(topic: str, *partitions: tuple[int, int, int], max_bytes: int = 2**31 - 1,
               max_wait: int = 0, min_bytes: int = 1) -> dict[str, Any]:
    """``partitions``: (index, fetch offset, partition max bytes)."""
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
                {"partition": index, "fetch_offset": offset, "partition_max_bytes": limit}
                for index, offset, limit in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}


def fetched(response: Any) -> dict[int, Any]:
    assert response.error_code == ErrorCode.none
    return {p.partition_index: p for t in response.responses for p in t.partitions}


async def test_fetch_returns_what_was_produced(broker) -> None:
    create_topic(broker, "orders")
    assert await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c")) == 0
    assert await produce_ok(broker, "orders", 0, batch(b"d")) == 3
    response = await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 0, 1 << 20)))
    p = fetched(response)[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == \
        (ErrorCode.none, 4, 4, 0)
    assert values_of(p.records) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    later = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 3, 1 << 20))))
    assert [offset for offset, _ in values_of(later[0].records)] == [3]


async def test_fetch_by_topic_id_returns_what_was_produced(broker) -> None:
    topic_id = create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a", b"b"))
    body = fetch_body("orders", (0, 0, 1 << 20))
    body["topics"] = [{"topic_id": topic_id, "partitions": body["topics"][0]["partitions"]}]
    body["forgotten_topics_data"] = []
    response = await ask(broker, ApiKey.FETCH, 16, body)
    (topic,) = response.responses
    assert topic.topic_id == topic_id
    assert values_of(topic.partitions[0].records) == [(0, b"a"), (1, b"b")]


async def test_fetch_respects_max_bytes_but_returns_at_least_one_batch(broker) -> None:
    create_topic(broker, "orders", partitions=2)
    await produce_ok(broker, "orders", 0, batch(b"a" * 100, b"b" * 100))
    await produce_ok(broker, "orders", 0, batch(b"c" * 100))
    await produce_ok(broker, "orders", 1, batch(b"d" * 100))
    # Each partition may return 1 byte and the response 1 byte: the first partition with
    # data still returns one whole batch (KIP-74), and nothing else fits.
    response = await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1), (1, 0, 1), max_bytes=1))
    parts = fetched(response)
    assert values_of(parts[0].records) == [(0, b"a" * 100), (1, b"b" * 100)]
    assert parts[0].high_watermark == 3
    assert parts[1].error_code == ErrorCode.none and len(parts[1].records or b"") == 0
    assert parts[1].high_watermark == 1
    # With room for more, the partition limit still caps each partition.
    first_batch = len(parts[0].records)
    response = await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, first_batch), (1, 0, 1 << 20)))
    parts = fetched(response)
    assert [o for o, _ in values_of(parts[0].records)] == [0, 1]
    assert values_of(parts[1].records) == [(0, b"d" * 100)]


async def test_a_later_partition_whose_next_batch_exceeds_its_limit_gets_nothing(
        broker) -> None:
    """Kafka's fetch (the oracle's fetch-edges): only the first partition with data may
    exceed the limits (one whole batch); a later partition whose next batch is larger
    than what it may return gets no records, not the batch's first bytes, and gets the
    batch whole once it is the first with data."""
    create_topic(broker, "orders", partitions=2)
    await produce_ok(broker, "orders", 0, batch(b"a" * 100))
    await produce_ok(broker, "orders", 1, batch(b"b" * 500))
    await produce_ok(broker, "orders", 1, batch(b"c"))
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 200), (1, 0, 200))))
    assert [o for o, _ in values_of(parts[0].records)] == [0]
    assert parts[1].error_code == ErrorCode.none and len(parts[1].records or b"") == 0
    # The response limit, not the partition's: the same.
    limit = len(parts[0].records) + 200
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20), (1, 0, 1 << 20), max_bytes=limit)))
    assert len(parts[1].records or b"") == 0
    # First with data (partition 0 is at its end): the whole batch, over the limit.
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 1, 200), (1, 0, 200))))
    assert values_of(parts[1].records) == [(0, b"b" * 500)]


async def test_fetch_of_unknown_partitions_answers_their_errors(broker) -> None:
    create_topic(broker, "orders")
    response = await ask(broker, ApiKey.FETCH, 12, {
        **fetch_body("orders", (0, 0, 1024), (5, 0, 1024)), "max_wait": 500})
    parts = fetched(response)
    assert parts[0].error_code == ErrorCode.none
    assert parts[5].error_code == ErrorCode.unknown_topic_or_partition
    body = fetch_body("orders", (0, 0, 1024))
    unknown = uuid.uuid4()
    body["topics"] = [{"topic_id": unknown, "partitions": body["topics"][0]["partitions"]}]
    response = await ask(broker, ApiKey.FETCH, 13, body)
    (topic,) = response.responses
    assert topic.topic_id == unknown
    assert topic.partitions[0].error_code == ErrorCode.unknown_topic_id


async def test_a_session_opened_before_its_topic_was_known_fetches_it_once_it_is(
        broker) -> None:
    """A follower may learn of a new partition before its leader does: its first fetch
    opens a session on a topic id the leader does not know yet. The session resolves the
    name once the topic arrives (Kafka's ``maybeResolveUnknownName``); the follower names
    the partition again only when its position moves, so nothing else would."""
    topic_id = uuid.uuid4()
    body = fetch_body("orders", (0, 0, 1 << 20))
    body["topics"] = [{"topic_id": topic_id, "partitions": body["topics"][0]["partitions"]}]
    body["session_epoch"] = 0
    first = await ask(broker, ApiKey.FETCH, 16, body)
    assert first.session_id != 0
    assert first.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id
    create_topic(broker, "orders", topic_id=topic_id)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b"))
    incremental = {**body, "session_id": first.session_id, "session_epoch": 1, "topics": []}
    (topic,) = (await ask(broker, ApiKey.FETCH, 16, incremental)).responses
    assert topic.partitions[0].error_code == ErrorCode.none
    assert values_of(topic.partitions[0].records) == [(0, b"a"), (1, b"b")]


async def test_fetch_beyond_the_log_end_answers_offset_out_of_range(broker) -> None:
    create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a"))
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 9, 1024))))
    assert parts[0].error_code == ErrorCode.offset_out_of_range
    # As Kafka 4.4 (the oracle's fetch-edges): a partition answered with an error has no
    # watermarks; the client asks ListOffsets where the log is.
    assert (parts[0].high_watermark, parts[0].last_stable_offset,
            parts[0].log_start_offset) == (-1, -1, -1)
    body = fetch_body("orders", (0, 0, 1024))
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = 5
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, body))
    assert (parts[0].error_code, parts[0].high_watermark, parts[0].last_stable_offset,
            parts[0].log_start_offset) == (ErrorCode.unknown_leader_epoch, -1, -1, -1)


async def test_a_waiting_fetch_is_woken_by_a_produce(broker) -> None:
    create_topic(broker, "orders")
    pending = handle(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20), max_wait=60_000))
    # Nothing to read: the handler returns a coroutine that waits for data.
    assert inspect.iscoroutine(pending)
    waiting = asyncio.ensure_future(pending)
    loop = asyncio.get_running_loop()
    # Runs after the fetch's first step, which starts watching the partition.
    loop.call_soon(lambda: broker.replica_manager.append(
        broker.replica_manager.partitions[("orders", 0)], batch(b"late"), -1, NOW_MS))
    body = await asyncio.wait_for(waiting, timeout=5)  # far less than max_wait
    assert values_of(fetched(decoded(ApiKey.FETCH, 12, body))[0].records) == [(0, b"late")]


# --- Fetch from followers --------------------------------------------------------------
# A follower broker fetches as a replica: ``replica_state`` (v15+) or ``replica_id``
# (before), the leader epoch it follows and the epoch of its last batch. It reads up to
# the log end, and its fetch offset is its position for the high watermark.

def replica_fetch_body(topic_id: uuid.UUID, *partitions: tuple[int, int, int, int],
                       replica_id: int = OTHER, replica_epoch: int = 10, max_wait: int = 0
                       ) -> dict[str, Any]:
    """A follower's Fetch v15+. ``partitions``: (index, fetch offset, current leader epoch,
    last fetched epoch)."""
    return {"replica_state": {"replica_id": replica_id, "replica_epoch": replica_epoch},
            "max_wait": max_wait, "min_bytes": 1, "max_bytes": 2**31 - 1,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": index, "fetch_offset": offset, "current_leader_epoch": current,
                 "last_fetched_epoch": last, "log_start_offset": 0,
                 "partition_max_bytes": 1 << 20}
                for index, offset, current, last in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}


def leader_with_records(broker: Broker, *values: bytes, replicas: tuple[int, ...] = (
        NODE, OTHER)) -> tuple[uuid.UUID, Any]:
    """A partition this broker leads with followers, holding ``values`` (appended with
    acks=1: nothing is committed until the followers fetch)."""
    topic_id = create_topic(broker, "orders", replicas=replicas)
    partition = broker.replica_manager.partitions[("orders", 0)]
    if values:
        broker.replica_manager.append(partition, batch(*values), 1, NOW_MS)
    return topic_id, partition


@pytest.mark.parametrize("version", [15, 17])
async def test_a_follower_reads_past_the_high_watermark_up_to_the_log_end(
        broker, version: int) -> None:
    topic_id, partition = leader_with_records(broker, b"a", b"b", b"c")
    assert partition.high_watermark == 0
    consumer = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20))))
    assert values_of(consumer[0].records or b"") == []  # a consumer stops at the HW
    parts = fetched(await ask(broker, ApiKey.FETCH, version, replica_fetch_body(
        topic_id, (0, 0, 0, -1))))
    assert parts[0].error_code == ErrorCode.none
    assert values_of(parts[0].records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert parts[0].high_watermark == 0  # the follower has nothing yet
    follower = partition.replication.followers[OTHER]
    assert (follower.log_end_offset, follower.broker_epoch) == (0, 10)


async def test_a_follower_fetch_offset_moves_the_high_watermark(broker) -> None:
    topic_id, partition = leader_with_records(broker, b"a", b"b", b"c")
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 3, 0, 0))))
    # Fetching from 3, the follower has 0..2: every in-sync replica has them.
    assert partition.high_watermark == 3 and partition.log.high_watermark == 3
    assert parts[0].high_watermark == 3 and parts[0].last_stable_offset == 3
    assert values_of(parts[0].records or b"") == []
    consumer = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20))))
    assert [offset for offset, _ in values_of(consumer[0].records)] == [0, 1, 2]


async def test_a_follower_fetch_with_a_replica_id_before_v15_is_a_follower_too(
        broker) -> None:
    _, partition = leader_with_records(broker, b"a", b"b")
    body = fetch_body("orders", (0, 2, 1 << 20))
    body["replica_id"] = OTHER
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, body))
    assert parts[0].high_watermark == 2 and partition.high_watermark == 2
    body = fetch_body("orders", (0, 0, 1 << 20))
    body["replica_id"] = OTHER
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, body))
    assert [offset for offset, _ in values_of(parts[0].records)] == [0, 1]
    assert partition.replication.followers[OTHER].broker_epoch == -1  # not sent before v15


async def test_a_fetch_from_a_broker_that_is_no_replica_is_refused(broker) -> None:
    topic_id, partition = leader_with_records(broker, b"a")
    stranger = 7
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 0, 0, -1), replica_id=stranger)))
    # In this leader epoch, but not a replica: maybe a reassignment not seen yet.
    assert parts[0].error_code == ErrorCode.unknown_leader_epoch
    assert len(parts[0].records or b"") == 0
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 0, -1, -1), replica_id=stranger)))
    assert parts[0].error_code == ErrorCode.not_leader_or_follower
    assert stranger not in partition.replication.followers
    assert partition.high_watermark == 0


async def test_a_follower_fetch_in_a_stale_leader_epoch_is_fenced(broker) -> None:
    topic_id, partition = leader_with_records(broker, b"a")
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    assert partition.leader_epoch == 1
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 1, 0, 0))))
    assert parts[0].error_code == ErrorCode.fenced_leader_epoch
    assert partition.replication.followers[OTHER].log_end_offset == -1  # not recorded
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 1, 2, 0))))
    assert parts[0].error_code == ErrorCode.unknown_leader_epoch


async def test_a_follower_whose_last_epoch_ends_earlier_here_gets_the_diverging_epoch(
        broker) -> None:
    topic_id, partition = leader_with_records(broker, b"a", b"b", b"c")
    # The same leader re-elected (epoch 1), then more records.
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    broker.replica_manager.append(partition, batch(b"d", b"e"), 1, NOW_MS)
    assert partition.log.leader_epoch_cache.entries == [(0, 0), (1, 3)]
    # The follower has four records of epoch 0 (one a former leader wrote only to it).
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 4, 1, 0))))
    p = parts[0]
    assert p.error_code == ErrorCode.none
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 3)
    assert len(p.records or b"") == 0
    # Its fetch offset is not a position: what it has there is not the leader's.
    assert partition.replication.followers[OTHER].log_end_offset == -1
    # Where its epoch 0 ends in time, it reads on.
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 3, 1, 0))))
    assert parts[0].diverging_epoch.epoch == -1
    assert values_of(parts[0].records) == [(3, b"d"), (4, b"e")]


async def test_a_parked_follower_fetch_is_woken_by_an_append_and_recorded_once(
        broker) -> None:
    topic_id, partition = leader_with_records(broker, b"a")
    replicas = broker.replica_manager
    recorded: list[tuple[int, int]] = []
    record = replicas.update_follower_fetch

    def counting(partition: Any, replica_id: int, fetch_offset: int, now_ms: int,
                 broker_epoch: int = -1) -> None:
        recorded.append((replica_id, fetch_offset))
        record(partition, replica_id, fetch_offset, now_ms, broker_epoch)

    replicas.update_follower_fetch = counting  # type: ignore[method-assign]
    pending = handle(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 1, 0, 0), max_wait=60_000))
    assert inspect.iscoroutine(pending)  # at the log end: nothing to read, it waits
    assert recorded == [(OTHER, 1)] and partition.high_watermark == 1
    waiting = asyncio.ensure_future(pending)
    await asyncio.sleep(0)  # it parks in the purgatory
    assert replicas.fetch_purgatory.watched(("orders", 0)) == 1 and not waiting.done()
    replicas.append(partition, batch(b"late"), 1, NOW_MS)
    parts = fetched(decoded(ApiKey.FETCH, 17, await asyncio.wait_for(waiting, timeout=5)))
    assert values_of(parts[0].records) == [(1, b"late")]
    # The re-read did not take the (unchanged) fetch offset as a new position.
    assert recorded == [(OTHER, 1)]
    assert partition.replication.followers[OTHER].log_end_offset == 1
    assert partition.high_watermark == 1 and parts[0].high_watermark == 1


# --- ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeLogDirs ---------------

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def list_offsets_body(topic: str, *queries: tuple[int, int]) -> dict[str, Any]:
    """``queries``: (partition, timestamp)."""
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": index, "timestamp": ts} for index, ts in queries]}]}


def offsets_of(response: Any) -> list[tuple[int, Any, int, int]]:
    """(partition, error, offset, timestamp) per partition asked for."""
    return [(p.partition_index, p.error_code, p.offset, p.timestamp)
            for t in response.topics for p in t.partitions]


async def test_list_offsets_answers_earliest_and_latest(broker) -> None:
    create_topic(broker, "orders", partitions=2)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c"))
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "timestamp": EARLIEST},
            {"partition_index": 1, "timestamp": LATEST}]}]})
    assert [(p.partition_index, p.error_code, p.offset)
            for p in response.topics[0].partitions] == \
        [(0, ErrorCode.none, 0), (1, ErrorCode.none, 0)]
    assert response.topics[0].partitions[0].leader_epoch == 0
    latest = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, LATEST)))
    assert [(p.offset, p.leader_epoch) for p in latest.topics[0].partitions] == [(3, 0)]
    # As Kafka: LATEST carries the current leader epoch, also of an empty partition.
    empty = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (1, LATEST)))
    assert [(p.offset, p.leader_epoch) for p in empty.topics[0].partitions] == [(0, 0)]


async def test_list_offsets_earliest_carries_the_epoch_of_the_log_start(broker) -> None:
    """As Kafka 4.4 (the oracle's list-offsets-by-time): the first epoch of the leader's
    epoch cache, which holds the leader's own epoch from its log end as soon as it leads,
    so an empty partition answers the current epoch; once written, the epoch that wrote
    the log start, not the current one."""
    topic_id = create_topic(broker, "orders")

    async def earliest() -> tuple[int, int]:
        response = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
            "orders", (0, EARLIEST)))
        (p,) = response.topics[0].partitions
        return p.offset, p.leader_epoch

    assert await earliest() == (0, 0)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b"))
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))  # epoch 1
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    await produce_ok(broker, "orders", 0, batch(b"c"))
    assert await earliest() == (0, 0)
    deleted = await ask(broker, ApiKey.DELETE_RECORDS, 2, {
        "timeout": 30000, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "offset": 2}]}]})
    assert deleted.topics[0].partitions[0].low_watermark == 2
    assert await earliest() == (2, 1)


async def test_list_offsets_naming_a_partition_twice_refuses_it_once(broker) -> None:
    """Kafka's ReplicaManager answers a duplicated partition once, INVALID_REQUEST (the
    oracle's list-offsets-by-time compares it with Kafka 4.4)."""
    create_topic(broker, "orders", partitions=2)
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, LATEST), (1, LATEST), (0, EARLIEST)))
    assert sorted((p.partition_index, p.error_code)
                  for p in response.topics[0].partitions) == [
        (0, ErrorCode.invalid_request), (1, ErrorCode.none)]


async def test_list_offsets_below_v7_cannot_ask_the_max_timestamp(broker) -> None:
    """KIP-734: MAX_TIMESTAMP (-3) is a v7 query; older versions get UNSUPPORTED_VERSION."""
    create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a", timestamp=NOW_MS))
    old = await ask(broker, ApiKey.LIST_OFFSETS, 6, list_offsets_body(
        "orders", (0, MAX_TIMESTAMP)))
    assert offsets_of(old) == [(0, ErrorCode.unsupported_version, -1, -1)]
    new = await ask(broker, ApiKey.LIST_OFFSETS, 7, list_offsets_body(
        "orders", (0, MAX_TIMESTAMP)))
    assert offsets_of(new) == [(0, ErrorCode.none, 0, NOW_MS)]


async def test_list_offsets_by_timestamp_finds_the_first_offset_at_or_after_it(
        broker) -> None:
    create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", timestamp=NOW_MS - 3000))
    await produce_ok(broker, "orders", 0, batch(b"c", timestamp=NOW_MS - 1000))
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, NOW_MS - 2000)))
    assert offsets_of(response) == [(0, ErrorCode.none, 2, NOW_MS - 1000)]
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, NOW_MS)))
    assert offsets_of(response) == [(0, ErrorCode.none, -1, -1)]
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, MAX_TIMESTAMP)))
    assert offsets_of(response) == [(0, ErrorCode.none, 2, NOW_MS - 1000)]


async def test_list_offsets_of_an_unknown_partition_is_an_error(broker) -> None:
    create_topic(broker, "orders")
    response = await ask(broker, ApiKey.LIST_OFFSETS, 8, {
        "replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "timestamp": LATEST},
                                              {"partition_index": 3, "timestamp": LATEST}]},
            {"name": "ghost", "partitions": [{"partition_index": 0, "timestamp": LATEST}]}]})
    assert [(t.name, p.partition_index, p.error_code, p.offset)
            for t in response.topics for p in t.partitions] == [
        ("orders", 0, ErrorCode.none, 0),
        ("orders", 3, ErrorCode.unknown_topic_or_partition, -1),
        ("ghost", 0, ErrorCode.unknown_topic_or_partition, -1)]


async def list_offsets_as(broker: Broker, replica_id: int, isolation: int,
                          *queries: tuple[int, int]) -> list[tuple[int, Any, int, int]]:
    """``offsets_of`` each query, asked one request each (a partition twice in one is
    INVALID_REQUEST)."""
    answers = []
    for query in queries:
        response = await ask(broker, ApiKey.LIST_OFFSETS, 8, {
            **list_offsets_body("orders", query), "replica_id": replica_id,
            "isolation_level": isolation})
        answers += offsets_of(response)
    return answers


async def test_list_offsets_answers_no_record_a_consumer_could_not_fetch_yet(broker) -> None:
    """As Kafka's ReplicaManager.fetchOffset: a record found by timestamp or as the max
    timestamp at or past where a consumer's fetch ends (the high watermark, here before
    the followers have anything) is no answer (-1, -1); a debugging tool (replica id -2)
    reads to the log end, LATEST included."""
    leader_with_records(broker, b"a", b"b")  # offsets 0-1, nothing committed
    queries = ((0, LATEST), (0, MAX_TIMESTAMP), (0, NOW_MS - 1))
    consumer = await list_offsets_as(broker, -1, 0, *queries)
    assert consumer == [(0, ErrorCode.none, 0, -1), (0, ErrorCode.none, -1, -1),
                        (0, ErrorCode.none, -1, -1)]
    debugging = await list_offsets_as(broker, -2, 0, *queries)
    # Both records carry NOW_MS: the max timestamp is the first with it.
    assert debugging == [(0, ErrorCode.none, 2, -1), (0, ErrorCode.none, 0, NOW_MS),
                         (0, ErrorCode.none, 0, NOW_MS)]


async def test_list_offsets_is_offset_not_available_while_a_new_leaders_hw_lags(
        broker) -> None:
    """Kafka's Partition.fetchOffsetForTimestamp: while a new leader's high watermark is
    below the start of its epoch, a consumer's LATEST, and a lookup by timestamp or max
    timestamp that finds nothing below the high watermark, are OFFSET_NOT_AVAILABLE (the
    client retries); EARLIEST is answered, and so is a debugging tool (replica id -2).
    Once the followers have the epoch start, the answers are the usual ones."""
    topic_id, partition = leader_with_records(broker, b"a", b"b")  # epoch 0, HW 0
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))  # epoch 1 starts at 2
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    assert (partition.leader_epoch, partition.high_watermark) == (1, 0)
    queries = ((0, LATEST), (0, MAX_TIMESTAMP), (0, NOW_MS - 1), (0, NOW_MS + 1),
               (0, EARLIEST))
    unavailable = (0, ErrorCode.offset_not_available, -1, -1)
    assert await list_offsets_as(broker, -1, 0, *queries) == [
        unavailable, unavailable, unavailable, unavailable, (0, ErrorCode.none, 0, -1)]
    assert await list_offsets_as(broker, -1, 1, (0, LATEST)) == [unavailable]
    assert await list_offsets_as(broker, -2, 0, (0, LATEST), (0, NOW_MS + 1)) == [
        (0, ErrorCode.none, 2, -1), (0, ErrorCode.none, -1, -1)]
    fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 2, 1, 0))))  # the follower has offsets 0-1: HW 2
    assert partition.high_watermark == 2
    assert await list_offsets_as(broker, -1, 0, *queries) == [
        (0, ErrorCode.none, 2, -1), (0, ErrorCode.none, 0, NOW_MS),
        (0, ErrorCode.none, 0, NOW_MS), (0, ErrorCode.none, -1, -1),
        (0, ErrorCode.none, 0, -1)]


async def test_list_offsets_read_committed_answers_no_record_of_an_open_transaction(
        broker) -> None:
    """The oracle's list-offsets-read-committed: under read_committed the last stable
    offset bounds lookups by timestamp and the max timestamp as it bounds LATEST."""
    create_topic(broker, "orders")
    partition = broker.replica_manager.partitions[("orders", 0)]
    broker.replica_manager.append(partition, batch(b"plain", timestamp=NOW_MS - 10), 1,
                                  NOW_MS)  # 0
    broker.replica_manager.append(partition, batch(
        b"open", timestamp=NOW_MS, producer_id=7, producer_epoch=0, base_sequence=0,
        transactional=True), 1, NOW_MS)  # 1, open
    queries = ((0, LATEST), (0, MAX_TIMESTAMP), (0, NOW_MS - 5), (0, NOW_MS - 10))
    committed = await list_offsets_as(broker, -1, 1, *queries)
    assert committed == [
        (0, ErrorCode.none, 1, -1), (0, ErrorCode.none, -1, -1),
        (0, ErrorCode.none, -1, -1), (0, ErrorCode.none, 0, NOW_MS - 10)]
    uncommitted = await list_offsets_as(broker, -1, 0, *queries)
    assert uncommitted == [
        (0, ErrorCode.none, 2, -1), (0, ErrorCode.none, 1, NOW_MS),
        (0, ErrorCode.none, 1, NOW_MS), (0, ErrorCode.none, 0, NOW_MS - 10)]


async def test_offset_for_leader_epoch_answers_the_end_of_each_epoch(broker) -> None:
    topic_id = create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c"))
    # A new leader epoch (the same leader re-elected), then more data.
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    await produce_ok(broker, "orders", 0, batch(b"d", b"e"))

    async def end_of(epoch: int, current: int = -1) -> tuple[Any, int, int]:
        response = await ask(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1, "topics": [{"topic": "orders", "partitions": [
                {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
        (p,) = response.topics[0].partitions
        return p.error_code, p.leader_epoch, p.end_offset

    assert await end_of(0) == (ErrorCode.none, 0, 3)
    assert await end_of(1, current=1) == (ErrorCode.none, 1, 5)
    assert (await end_of(1, current=0))[0] == ErrorCode.fenced_leader_epoch
    assert (await end_of(1, current=2))[0] == ErrorCode.unknown_leader_epoch


async def test_offset_for_leader_epoch_knows_the_leaders_epoch_before_it_writes(
        broker) -> None:
    """As Kafka (the oracle's offset-for-leader-epoch): a new leader's epoch is in its
    cache from its log end at once, so an empty partition's epoch 0 ends at 0, and an
    epoch nothing was written in yet ends at the log end, not undefined."""
    topic_id = create_topic(broker, "orders")

    async def end_of(epoch: int) -> tuple[Any, int, int]:
        response = await ask(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1, "topics": [{"topic": "orders", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
        (p,) = response.topics[0].partitions
        return p.error_code, p.leader_epoch, p.end_offset

    assert await end_of(0) == (ErrorCode.none, 0, 0)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c"))
    broker.image.replay(r.PartitionChangeRecord(partition_id=0, topic_id=topic_id,
                                                leader=NODE))  # epoch 1, nothing written
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    assert await end_of(1) == (ErrorCode.none, 1, 3)
    assert await end_of(0) == (ErrorCode.none, 0, 3)
    assert await end_of(2) == (ErrorCode.none, -1, -1)


async def test_delete_records_moves_the_log_start_offset(broker) -> None:
    create_topic(broker, "orders", partitions=2)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c", b"d"))
    await produce_ok(broker, "orders", 1, batch(b"x", b"y"))
    response = await ask(broker, ApiKey.DELETE_RECORDS, 2, {
        "timeout": 30000, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "offset": 3},
            {"partition_index": 1, "offset": -1},  # up to the high watermark
            {"partition_index": 2, "offset": 0}]}]})
    assert [(p.partition_index, p.error_code, p.low_watermark)
            for p in response.topics[0].partitions] == [
        (0, ErrorCode.none, 3), (1, ErrorCode.none, 2),
        (2, ErrorCode.unknown_topic_or_partition, -1)]
    earliest = await ask(broker, ApiKey.LIST_OFFSETS, 8, list_offsets_body(
        "orders", (0, EARLIEST), (1, EARLIEST)))
    assert [offset for _, _, offset, _ in offsets_of(earliest)] == [3, 2]
    parts = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 0, 1024))))
    assert parts[0].error_code == ErrorCode.offset_out_of_range


async def test_delete_records_beyond_the_high_watermark_is_out_of_range(broker) -> None:
    create_topic(broker, "orders")
    await produce_ok(broker, "orders", 0, batch(b"a"))
    response = await ask(broker, ApiKey.DELETE_RECORDS, 2, {
        "timeout": 30000, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "offset": 5}]}]})
    (p,) = response.topics[0].partitions
    assert (p.error_code, p.low_watermark) == (ErrorCode.offset_out_of_range, -1)
    assert broker.replica_manager.partitions[("orders", 0)].log.log_start_offset == 0


async def test_describe_log_dirs_lists_the_hosted_partitions_and_their_sizes(
        broker, tmp_path) -> None:
    create_topic(broker, "orders", partitions=2)
    create_topic(broker, "other")
    await produce_ok(broker, "orders", 1, batch(b"a" * 50))
    everything = await ask(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert everything.error_code == ErrorCode.none
    (log_dir,) = everything.results
    assert log_dir.error_code == ErrorCode.none
    assert log_dir.log_dir == os.path.abspath(tmp_path / "logs")
    assert log_dir.total_bytes > 0 and 0 <= log_dir.usable_bytes <= log_dir.total_bytes
    sizes = {(t.name, p.partition_index): p.partition_size
             for t in log_dir.topics for p in t.partitions}
    assert set(sizes) == {("orders", 0), ("orders", 1), ("other", 0)}
    assert sizes[("orders", 0)] == 0 and sizes[("other", 0)] == 0
    assert sizes[("orders", 1)] == \
        broker.replica_manager.partitions[("orders", 1)].log.size > 0
    some = await ask(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {
        "topics": [{"topic": "orders", "partitions": [1]}]})
    assert [(t.name, [p.partition_index for p in t.partitions])
            for t in some.results[0].topics] == [("orders", [1])]


@pytest.mark.parametrize("broker", [{"log.dirs": "{tmp}/logs,{tmp}/logs2"}], indirect=True)
async def test_describe_log_dirs_lists_a_moving_replica_twice_until_it_has_moved(
        broker) -> None:
    create_topic(broker, "orders")
    for _ in range(3):
        await produce_ok(broker, "orders", 0, batch(b"a" * 50, b"b"))
    source = os.path.dirname(broker.replica_manager.partitions[("orders", 0)].log.dir)
    destination = next(d for d in broker.replica_manager.log_manager.log_dirs if d != source)

    def where() -> dict[str, list[tuple[int, bool, int]]]:
        answer = handle(broker, ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
        return {r["log_dir"]: [(p["partition_index"], p["is_future_key"], p["offset_lag"])
                               for t in r["topics"] for p in t["partitions"]]
                for r in answer["results"]}

    moved = await ask(broker, ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
        {"path": destination, "topics": [{"name": "orders", "partitions": [0]}]}]})
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in moved.results] == [("orders", [(0, ErrorCode.none)])]
    # As Kafka: the replica where it is, and its future log, lagging by what is left.
    assert where() == {source: [(0, False, 0)], destination: [(0, True, 6)]}
    while broker.replica_manager.moving():
        broker.replica_manager.move_step(("orders", 0), 100, NOW_MS)
    assert where() == {source: [], destination: [(0, False, 0)]}
    p = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 0, 1 << 20))))[0]
    assert (p.error_code, p.high_watermark) == (ErrorCode.none, 6)
    assert [v for _, v in values_of(p.records)] == [b"a" * 50, b"b"] * 3


# --- Metadata and DescribeCluster ---------------------------------------------------------

async def test_metadata_lists_every_topic_with_its_leaders(broker) -> None:
    orders = create_topic(broker, "orders", partitions=2)
    other = create_topic(broker, "other")
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": None, "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    assert response.cluster_id == CLUSTER_ID
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(NODE, HOST, PORT)]
    assert [(t.name, t.topic_id, t.error_code, t.is_internal) for t in response.topics] == [
        ("orders", orders, ErrorCode.none, False), ("other", other, ErrorCode.none, False)]
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in response.topics[0].partitions] == \
        [(0, NODE, 0, (NODE,), (NODE,)), (1, NODE, 0, (NODE,), (NODE,))]
    assert controller_of(broker).calls == []


async def test_metadata_for_named_topics_answers_unknown_ones_without_creating(
        broker) -> None:
    create_topic(broker, "orders")
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": [{"name": "orders", "topic_id": None}, {"name": "ghost", "topic_id": None}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("orders", ErrorCode.none), ("ghost", ErrorCode.unknown_topic_or_partition)]
    assert controller_of(broker).calls == []


async def test_metadata_by_topic_id_answers_unknown_topic_id(broker) -> None:
    orders = create_topic(broker, "orders")
    unknown = uuid.uuid4()
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": [{"name": None, "topic_id": orders}, {"name": None, "topic_id": unknown}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
        ("orders", orders, ErrorCode.none), (None, unknown, ErrorCode.unknown_topic_id)]


@pytest.mark.parametrize("version", [10, 11])
async def test_metadata_with_topic_ids_before_v12_is_an_invalid_request(
        broker, version) -> None:
    orders = create_topic(broker, "orders")
    with pytest.raises(KafkaError) as raised:
        await raw_call(broker, ApiKey.METADATA, version, {
            "topics": [{"name": None, "topic_id": orders}],
            "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
    assert raised.value.code == ErrorCode.invalid_request


async def test_metadata_auto_creates_a_missing_topic_through_the_controller(broker) -> None:
    controller = controller_of(broker)
    controller.answers[ApiKey.CREATE_TOPICS] = {"throttle_time": 0, "topics": [
        {"name": "fresh", "error_code": ErrorCode.none, "error_message": None,
         "topic_id": None, "num_partitions": 1, "replication_factor": 1, "configs": None}]}
    # As the real controller's committed records reach the broker's image.
    controller.on_call = lambda api_key, body: create_topic(broker, "fresh")
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": [{"name": "fresh", "topic_id": None},
                   {"name": "bad name!", "topic_id": None}],
        "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    ((api_key, _, body),) = controller.calls
    assert api_key == ApiKey.CREATE_TOPICS
    # Only the valid name is asked for, with this broker's num.partitions and
    # default.replication.factor (Kafka's AutoTopicCreationManager), not -1.
    assert [(t["name"], t["num_partitions"], t["replication_factor"])
            for t in body["topics"]] == [("fresh", broker.config["num.partitions"],
                                          broker.config["default.replication.factor"])]
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("fresh", ErrorCode.none, 1), ("bad name!", ErrorCode.invalid_topic_exception, 0)]


async def test_metadata_answers_a_topic_being_created_leader_not_available(broker) -> None:
    """As Kafka: created, but not yet in this broker's metadata: retriable."""
    controller = controller_of(broker)
    controller.answers[ApiKey.CREATE_TOPICS] = {"throttle_time": 0, "topics": [
        {"name": "soon", "error_code": ErrorCode.none, "error_message": None,
         "topic_id": None, "num_partitions": 1, "replication_factor": 1, "configs": None}]}
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": [{"name": "soon", "topic_id": None}],
        "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("soon", ErrorCode.leader_not_available)]
    response = await ask(broker, ApiKey.METADATA, 12, {
        "topics": [{"name": "never", "topic_id": None}],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("never", ErrorCode.unknown_topic_or_partition)]


async def test_describe_cluster_lists_the_unfenced_brokers(broker) -> None:
    register_broker(broker.image, OTHER, 9094, fenced=True)
    response = await ask(broker, ApiKey.DESCRIBE_CLUSTER, 2, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1,
        "include_fenced_brokers": False})
    assert (response.error_code, response.cluster_id, response.endpoint_type) == \
        (ErrorCode.none, CLUSTER_ID, 1)
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(NODE, HOST, PORT)]
    with_fenced = await ask(broker, ApiKey.DESCRIBE_CLUSTER, 2, {
        "include_cluster_authorized_operations": False, "endpoint_type": 1,
        "include_fenced_brokers": True})
    assert [(b.broker_id, b.is_fenced) for b in with_fenced.brokers] == \
        [(NODE, False), (OTHER, True)]


async def test_describe_cluster_for_controllers_on_a_broker_is_unsupported(broker) -> None:
    response = await ask(broker, ApiKey.DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert response.error_code == ErrorCode.unsupported_endpoint_type
    assert response.endpoint_type == 2 and list(response.brokers) == []


# --- DescribeConfigs ----------------------------------------------------------------------

DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def describe_configs_body(resource_type: int, name: str, keys: list[str] | None,
                          synonyms: bool = False) -> dict[str, Any]:
    return {"resources": [{"resource_type": resource_type, "resource_name": name,
                           "configuration_keys": keys}],
            "include_synonyms": synonyms, "include_documentation": False}


def entries(response: Any) -> dict[str, Any]:
    (result,) = response.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


async def test_describe_configs_of_a_topic_reports_values_and_sources(broker) -> None:
    create_topic(broker, "orders", configs={"retention.ms": "1000"})
    # A cluster-wide dynamic default, which topics without an override inherit.
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.BROKER,
                                       resource_name="", name="log.segment.bytes",
                                       value="2000000"))
    found = entries(await ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(
        ConfigResourceType.TOPIC, "orders",
        ["retention.ms", "segment.bytes", "cleanup.policy"], synonyms=True)))
    assert set(found) == {"retention.ms", "segment.bytes", "cleanup.policy"}
    assert (found["retention.ms"].value, found["retention.ms"].config_source) == \
        ("1000", DYNAMIC_TOPIC)
    assert (found["segment.bytes"].value, found["segment.bytes"].config_source) == \
        ("2000000", DYNAMIC_DEFAULT)
    synonym = found["segment.bytes"].synonyms[0]
    assert (synonym.name, synonym.source) == ("log.segment.bytes", DYNAMIC_DEFAULT)
    assert (found["cleanup.policy"].value, found["cleanup.policy"].config_source) == \
        ("delete", DEFAULT)


async def test_describe_configs_of_an_unknown_topic_is_an_error(broker) -> None:
    response = await ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(
        ConfigResourceType.TOPIC, "ghost", None))
    (result,) = response.results
    assert (result.error_code, list(result.configs)) == \
        (ErrorCode.unknown_topic_or_partition, [])


async def test_describe_configs_of_the_broker_reports_values_and_sources(broker) -> None:
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.BROKER,
                                       resource_name=str(NODE),
                                       name="log.retention.bytes", value="12345"))
    found = entries(await ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(
        ConfigResourceType.BROKER, str(NODE),
        ["offsets.topic.num.partitions", "log.retention.bytes", "num.partitions"],
        synonyms=True)))
    static = found["offsets.topic.num.partitions"]
    assert (static.value, static.config_source, static.read_only) == ("1", STATIC, True)
    dynamic = found["log.retention.bytes"]
    assert (dynamic.value, dynamic.config_source, dynamic.read_only) == \
        ("12345", DYNAMIC_BROKER, False)
    assert [s.source for s in dynamic.synonyms] == [DYNAMIC_BROKER, DEFAULT]
    default = found["num.partitions"]
    assert (default.value, default.config_source) == ("1", DEFAULT)


async def test_describe_configs_of_the_cluster_default_lists_only_its_dynamic_configs(
        broker) -> None:
    """As Kafka: the broker resource named "" is the cluster-wide dynamic defaults."""
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.BROKER,
                                       resource_name="", name="log.retention.ms",
                                       value="3600000"))
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.BROKER,
                                       resource_name=str(NODE),
                                       name="log.retention.bytes", value="12345"))
    found = entries(await ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(
        ConfigResourceType.BROKER, "", None)))
    assert {name: (c.value, c.config_source) for name, c in found.items()} == {
        "log.retention.ms": ("3600000", DYNAMIC_DEFAULT)}


async def test_describe_configs_of_another_broker_is_an_invalid_request(broker) -> None:
    response = await ask(broker, ApiKey.DESCRIBE_CONFIGS, 4, describe_configs_body(
        ConfigResourceType.BROKER, str(OTHER), None))
    (result,) = response.results
    assert result.error_code == ErrorCode.invalid_request


# --- InitProducerId and DescribeProducers ---------------------------------------------

def allocation(start: int, length: int = 1000, error: ErrorCode = ErrorCode.none
               ) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "producer_id_start": start,
            "producer_id_len": length}


def init_producer_id_body(transactional_id: str | None = None) -> dict[str, Any]:
    return {"transactional_id": transactional_id, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1}


async def test_a_transactional_producer_is_initialized_by_its_transaction_coordinator(
        broker) -> None:
    """FindCoordinator (key type 1) names the leader of the transactional id's
    ``__transaction_state`` partition; InitProducerId gives a producer id from the
    controller's block at epoch 0, then bumps the epoch for the next instance; EndTxn
    without a transaction is INVALID_TXN_STATE."""
    service = transaction_coordinator(broker)
    service.on_metadata(NOW_MS)
    controller_of(broker).answers[ApiKey.ALLOCATE_PRODUCER_IDS] = allocation(7000)
    found = await ask(broker, ApiKey.FIND_COORDINATOR, 4, {
        "key_type": 1, "coordinator_keys": ["txn-1"]})
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == \
        (ErrorCode.none, NODE)
    first = await ask(broker, ApiKey.INIT_PRODUCER_ID, 5, init_producer_id_body("txn-1"))
    assert (first.error_code, first.producer_id, first.producer_epoch) == \
        (ErrorCode.none, 7000, 0)
    again = await ask(broker, ApiKey.INIT_PRODUCER_ID, 5, init_producer_id_body("txn-1"))
    assert (again.producer_id, again.producer_epoch) == (7000, 1)
    end = await ask(broker, ApiKey.END_TXN, 3, {"transactional_id": "txn-1",
                                                 "producer_id": 7000, "producer_epoch": 1,
                                                 "committed": True})
    assert end.error_code == ErrorCode.invalid_txn_state
    await service.close()
    service.shutdown()


def transaction_coordinator(broker: Broker) -> TransactionCoordinatorService:
    """The broker's transaction coordinator over a ``__transaction_state`` of
    ``transaction.state.log.num.partitions`` partitions this broker leads (loaded by
    ``on_metadata``)."""
    from ottla.common.topics import TRANSACTION_STATE_TOPIC

    create_topic(broker, TRANSACTION_STATE_TOPIC,
                 partitions=broker.config["transaction.state.log.num.partitions"],
                 configs={"cleanup.policy": "compact"})
    return broker.transaction_coordinator


def list_transactions_body(states: tuple[str, ...] = (), producer_ids: tuple[int, ...] = (),
                           duration_ms: int = -1) -> dict[str, Any]:
    return {"state_filters": list(states), "producer_id_filters": list(producer_ids),
            "duration_filter": duration_ms}


def listed(response: Any) -> list[tuple[str, int, str]]:
    assert response.error_code == ErrorCode.none
    return sorted((t.transactional_id, t.producer_id, t.transaction_state)
                  for t in response.transaction_states)


async def test_describe_and_list_transactions_show_an_ongoing_transaction(broker) -> None:
    """DescribeTransactions answers an id's producer, state, timeout, start and
    partitions, TRANSACTIONAL_ID_NOT_FOUND for an unknown id and INVALID_REQUEST for an
    empty one; ListTransactions filters by state (naming unknown states), producer id
    and, from v1, by how long the transaction has been open (KIP-994)."""
    service = transaction_coordinator(broker)
    service.on_metadata(NOW_MS)
    controller_of(broker).answers[ApiKey.ALLOCATE_PRODUCER_IDS] = allocation(7000)
    create_topic(broker, "orders", partitions=2)
    for transactional_id in ("txn-1", "txn-2"):
        await ask(broker, ApiKey.INIT_PRODUCER_ID, 5, init_producer_id_body(transactional_id))
    added = await ask(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "txn-1", "v3_and_below_producer_id": 7000,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "orders", "partitions": [1, 0]}]})
    assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {ErrorCode.none}

    described = await ask(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {
        "transactional_ids": ["txn-1", "nobody", ""]})
    ongoing, missing, empty = described.transaction_states
    assert (ongoing.error_code, ongoing.transactional_id, ongoing.transaction_state,
            ongoing.producer_id, ongoing.producer_epoch) == \
        (ErrorCode.none, "txn-1", "Ongoing", 7000, 0)
    assert ongoing.transaction_timeout.total_seconds() == 60
    assert ongoing.transaction_start_time.timestamp() * 1000 == NOW_MS
    assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [("orders", [0, 1])]
    assert (missing.transactional_id, missing.error_code) == \
        ("nobody", ErrorCode.transactional_id_not_found)
    assert empty.error_code == ErrorCode.invalid_request

    everything = [("txn-1", 7000, "Ongoing"), ("txn-2", 7001, "Empty")]
    assert listed(await ask(broker, ApiKey.LIST_TRANSACTIONS, 0,
                            list_transactions_body())) == everything
    by_state = await ask(broker, ApiKey.LIST_TRANSACTIONS, 1,
                         list_transactions_body(states=("Ongoing", "Hanging")))
    assert listed(by_state) == everything[:1]
    assert list(by_state.unknown_state_filters) == ["Hanging"]
    assert listed(await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body(
        states=("Hanging",)))) == []
    assert listed(await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body(
        producer_ids=(7001, 42)))) == everything[1:]
    # Open 5 s: listed for a filter of 4 s, not for one of 5 s (an id that never began a
    # transaction counts as started at -1, as in Kafka).
    broker.clock = lambda: (NOW_MS + 5000) / 1000
    assert listed(await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body(
        states=("Ongoing",), duration_ms=4000))) == everything[:1]
    assert listed(await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body(
        states=("Ongoing",), duration_ms=5000))) == []
    await service.close()
    service.shutdown()


@pytest.mark.parametrize("broker", [{"transaction.state.log.num.partitions": "2"}],
                         indirect=True)
async def test_transaction_admin_answers_for_the_partitions_this_broker_leads(
        broker) -> None:
    """An id whose ``__transaction_state`` partition another broker leads is
    NOT_COORDINATOR here; while a partition this broker leads is loading, its ids are
    COORDINATOR_LOAD_IN_PROGRESS and so is the whole ListTransactions answer, as in
    Kafka; once loaded, its ids are listed."""
    from ottla.cli.transactions import parse_describe_transactions
    from ottla.common.topics import TRANSACTION_STATE_TOPIC
    from ottla.coordinator.transaction.metadata import new_transaction
    from ottla.coordinator.transaction.shard import TransactionRecord, encode_record
    from ottla.protocol.codec import encode_body
    from ottla.protocol.records import read_header

    service = transaction_coordinator(broker)
    register_broker(broker.image, OTHER, PORT + 1)
    topic_id = broker.image.topics_by_name[TRANSACTION_STATE_TOPIC].topic_id
    broker.image.replay(r.PartitionChangeRecord(partition_id=1, topic_id=topic_id,
                                                leader=OTHER, isr=(OTHER,)))
    broker.replica_manager.apply_metadata(broker.image, NOW_MS)
    here = [f"id-{i}" for i in range(20000) if service.partition_for(f"id-{i}")[1] == 0]
    elsewhere = next(f"id-{i}" for i in range(100) if service.partition_for(f"id-{i}")[1] == 1)
    records = [encode_record(TransactionRecord(tid, new_transaction(
        tid, 100 + i, 60000, NOW_MS).to_value()), 0) for i, tid in enumerate(here)]
    partition = broker.replica_manager.require(TRANSACTION_STATE_TOPIC, 0, broker.image)
    data = bytearray(build_batch(records, timestamp=NOW_MS))
    broker.replica_manager.append_internal(partition, data, read_header(data), NOW_MS)
    service.on_metadata(NOW_MS)  # more records than one slice: the rest loads later

    loading = await ask(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {
        "transactional_ids": [here[0], elsewhere]})
    assert [s.error_code for s in loading.transaction_states] == [
        ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator]
    assert (await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body())
            ).error_code == ErrorCode.coordinator_load_in_progress

    async def loaded() -> Any:
        while True:
            answer = await ask(broker, ApiKey.LIST_TRANSACTIONS, 1, list_transactions_body())
            if answer.error_code != ErrorCode.coordinator_load_in_progress:
                return answer
            await asyncio.sleep(0.01)

    answer = await asyncio.wait_for(loaded(), 10)
    assert sorted(t.transactional_id for t in answer.transaction_states) == sorted(here)
    # An id that never began a transaction has a start time of -1, which kio does not
    # read: the response is read as ``ottla transactions`` reads it.
    response = await raw_call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {
        "transactional_ids": [here[0]]})
    body = encode_body(build(response_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0), response))
    (described,) = parse_describe_transactions(
        response_header_bytes(ApiKey.DESCRIBE_TRANSACTIONS, 0, 17, len(body))[4:] + body)
    assert (described.error, described.state, described.producer_id, described.start_ms) \
        == (ErrorCode.none, "Empty", 100, -1)
    await service.close()
    service.shutdown()


async def test_init_producer_id_hands_out_ids_from_the_controllers_block(broker) -> None:
    controller = controller_of(broker)
    controller.answers[ApiKey.ALLOCATE_PRODUCER_IDS] = allocation(5000, 2)
    ids = []
    for _ in range(3):
        response = await ask(broker, ApiKey.INIT_PRODUCER_ID, 5, init_producer_id_body())
        assert (response.error_code, response.producer_epoch) == (ErrorCode.none, 0)
        ids.append(response.producer_id)
        controller.answers[ApiKey.ALLOCATE_PRODUCER_IDS] = allocation(7000, 2)
    assert ids == [5000, 5001, 7000]
    assert [(key, body) for key, _, body in controller.calls] == [
        (ApiKey.ALLOCATE_PRODUCER_IDS, {"broker_id": NODE, "broker_epoch": 10})] * 2


async def test_init_producer_id_without_a_block_is_retriable(broker) -> None:
    controller_of(broker).answers[ApiKey.ALLOCATE_PRODUCER_IDS] = allocation(
        -1, 0, ErrorCode.unknown_server_error)
    response = await ask(broker, ApiKey.INIT_PRODUCER_ID, 5, init_producer_id_body())
    assert response.error_code == ErrorCode.coordinator_load_in_progress
    assert response.producer_id == -1


async def test_describe_producers_lists_the_idempotent_producers_of_a_partition(
        broker) -> None:
    create_topic(broker, "orders", partitions=2)
    await produce_ok(broker, "orders", 0, batch(b"a", b"b", b"c", producer_id=4242,
                                                producer_epoch=3, base_sequence=0))
    await produce_ok(broker, "orders", 1, batch(b"plain"))
    response = await ask(broker, ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": "orders", "partition_indexes": [0, 1, 9]}]})
    parts = {p.partition_index: p for p in response.topics[0].partitions}
    (active,) = parts[0].active_producers
    assert (active.producer_id, active.producer_epoch, active.last_sequence,
            active.last_timestamp, active.current_txn_start_offset) == \
        (4242, 3, 2, NOW_MS, -1)
    assert (parts[1].error_code, list(parts[1].active_producers)) == (ErrorCode.none, [])
    assert parts[9].error_code == ErrorCode.unknown_topic_or_partition


# --- forwarding ------------------------------------------------------------------------

FORWARDED_CASES = {
    "CreateTopics": (ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": "new", "num_partitions": 3, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": "retention.ms", "value": "5"}]}],
        "timeout": 30000, "validate_only": False}, {"throttle_time": 0, "topics": [
            {"name": "new", "error_code": ErrorCode.none, "error_message": None,
             "topic_id": uuid.UUID(int=99), "num_partitions": 3, "replication_factor": 1,
             "configs": []}]}),
    "IncrementalAlterConfigs": (ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": ConfigResourceType.TOPIC, "resource_name": "orders",
                       "configs": [{"name": "retention.ms", "config_operation": 0,
                                    "value": "60000"}]}], "validate_only": False},
        {"throttle_time": 0, "responses": [
            {"error_code": ErrorCode.policy_violation, "error_message": "no",
             "resource_type": ConfigResourceType.TOPIC, "resource_name": "orders"}]}),
}


@pytest.mark.parametrize("case", sorted(FORWARDED_CASES))
async def test_metadata_changes_are_forwarded_to_the_controller_unchanged(
        broker, case) -> None:
    api_key, version, request_body, response_body = FORWARDED_CASES[case]
    create_topic(broker, "orders")
    controller = controller_of(broker)
    answer = build(response_schema(api_key, version), response_body)
    controller.forward_answer = answer
    request = build(request_schema(api_key, version), request_body)
    ctx = context(api_key, version)
    response = await SPECS[api_key].handler(broker, ctx, request)
    # The request goes whole, with its context (header, principal), and the controller's
    # answer comes back as it is, even an error.
    ((forwarded_ctx, forwarded),) = controller.forwarded
    assert (forwarded_ctx.header, forwarded_ctx.principal) == (ctx.header, ctx.principal)
    assert forwarded == request
    assert response == answer
    assert decoded(api_key, version, response) == answer
    # The broker changed nothing itself.
    assert "new" not in broker.image.topics_by_name
    assert broker.image.topic_configs("orders") == {}
    assert controller.calls == []


# --- groups -------------------------------------------------------------------------------

@pytest.fixture
async def coordinator(broker) -> GroupCoordinatorService:
    """A real group coordinator over a real ``__consumer_offsets`` partition this broker
    leads (offsets.topic.num.partitions=1)."""
    create_topic(broker, OFFSETS_TOPIC, configs={"cleanup.policy": "compact"})
    service = broker.group_coordinator
    service.on_metadata(NOW_MS)
    return service


async def test_find_coordinator_answers_the_leader_of_the_groups_partition(
        broker, coordinator) -> None:
    response = await ask(broker, ApiKey.FIND_COORDINATOR, 4, {
        "key_type": 0, "coordinator_keys": ["g1", "g2"]})
    assert [(c.key, c.error_code, c.node_id, c.host, c.port)
            for c in response.coordinators] == [
        ("g1", ErrorCode.none, NODE, HOST, PORT), ("g2", ErrorCode.none, NODE, HOST, PORT)]
    old = await ask(broker, ApiKey.FIND_COORDINATOR, 2, {"key": "g1", "key_type": 0})
    assert (old.error_code, old.node_id, old.host, old.port) == \
        (ErrorCode.none, NODE, HOST, PORT)


async def test_find_coordinator_creates_the_offsets_topic_on_first_use(broker) -> None:
    # No __consumer_offsets yet: the coordinator is not available, and the broker asks the
    # controller to create the topic.
    service = broker.group_coordinator
    controller = controller_of(broker)
    controller.answers[ApiKey.CREATE_TOPICS] = {"throttle_time": 0, "topics": [
        {"name": OFFSETS_TOPIC, "error_code": ErrorCode.none, "error_message": None,
         "topic_id": None, "num_partitions": 1, "replication_factor": 1, "configs": None}]}
    response = await ask(broker, ApiKey.FIND_COORDINATOR, 4, {
        "key_type": 0, "coordinator_keys": ["g1"]})
    (found,) = response.coordinators
    assert (found.error_code, found.node_id) == (ErrorCode.coordinator_not_available, -1)
    # The creation runs as a task of its own; wait for it (a private handle: the only one).
    await asyncio.wait_for(service._creating, timeout=10)
    ((api_key, _, body),) = controller.calls
    assert api_key == ApiKey.CREATE_TOPICS
    (topic,) = body["topics"]
    assert (topic["name"], topic["num_partitions"], topic["replication_factor"]) == \
        (OFFSETS_TOPIC, 1, 1)
    assert {"name": "cleanup.policy", "value": "compact"} in topic["configs"]


async def test_group_requests_for_a_partition_led_elsewhere_answer_not_coordinator(
        broker) -> None:
    # The routing errors are the handlers' own answers: the group's partition is led by
    # another broker, so this one loads no shard for it.
    register_broker(broker.image, OTHER, 9094)
    create_topic(broker, OFFSETS_TOPIC, leader=OTHER)
    create_topic(broker, "orders", partitions=2)
    service = broker.group_coordinator
    service.on_metadata(NOW_MS)
    found = await ask(broker, ApiKey.FIND_COORDINATOR, 4, {
        "key_type": 0, "coordinator_keys": ["g"]})
    assert [(c.error_code, c.node_id, c.port) for c in found.coordinators] == \
        [(ErrorCode.none, OTHER, 9094)]
    heartbeat = await ask(broker, ApiKey.HEARTBEAT, 4, {
        "group_id": "g", "generation_id": 1, "member_id": "m"})
    assert heartbeat.error_code == ErrorCode.not_coordinator
    fetched_offsets = await ask(broker, ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "g", "topics": None}], "require_stable": False})
    assert fetched_offsets.groups[0].error_code == ErrorCode.not_coordinator
    committed = await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": None},
            {"partition_index": 1, "committed_offset": 1, "committed_metadata": None}]}]})
    assert [p.error_code for p in committed.topics[0].partitions] == \
        [ErrorCode.not_coordinator] * 2


async def test_find_coordinator_for_share_state_checks_the_key(broker, coordinator
                                                                ) -> None:
    """Key type 2 names a share-partition (group:topicId:partition); without a share
    coordinator running it is not available, a malformed key is INVALID_REQUEST."""
    response = await ask(broker, ApiKey.FIND_COORDINATOR, 6, {
        "key_type": 2, "coordinator_keys": ["share-group:AAAAAAAAAAAAAAAAAAAAAA:0",
                                            "share-group:orders", "share-group:t:x"]})
    assert [c.error_code for c in response.coordinators] == [
        ErrorCode.coordinator_not_available, ErrorCode.invalid_request,
        ErrorCode.invalid_request]


async def test_offsets_committed_by_a_simple_consumer_can_be_fetched(
        broker, coordinator) -> None:
    create_topic(broker, "orders", partitions=2)
    committed = await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m0"},
            {"partition_index": 1, "committed_offset": 7, "committed_metadata": None}]}]})
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == \
        [(0, ErrorCode.none), (1, ErrorCode.none)]
    response = await ask(broker, ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "g", "topics": [
            {"name": "orders", "partition_indexes": [0, 1]}]}], "require_stable": False})
    (group,) = response.groups
    assert group.error_code == ErrorCode.none
    assert [(p.partition_index, p.committed_offset, p.metadata)
            for p in group.topics[0].partitions] == [(0, 42, "m0"), (1, 7, "")]
    # The commit is a record in __consumer_offsets: a reloaded shard knows it too.
    assert log_end(broker, OFFSETS_TOPIC) > 0
    coordinator.runtime.unload((OFFSETS_TOPIC, 0))
    coordinator.on_metadata(NOW_MS)
    again = await ask(broker, ApiKey.OFFSET_FETCH, 7, {
        "group_id": "g", "topics": None, "require_stable": False})
    assert again.error_code == ErrorCode.none
    assert sorted((t.name, p.partition_index, p.committed_offset)
                  for t in again.topics for p in t.partitions) == \
        [("orders", 0, 42), ("orders", 1, 7)]


async def test_a_classic_group_joins_syncs_heartbeats_and_leaves(broker, coordinator) -> None:
    join_body = {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                 "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                 "protocols": [{"name": "range", "metadata": b"sub"}], "reason": None}
    first = await ask(broker, ApiKey.JOIN_GROUP, 9, join_body)
    assert first.error_code == ErrorCode.member_id_required
    member = first.member_id
    assert member.startswith("handler-tests-")
    joined_ = await ask(broker, ApiKey.JOIN_GROUP, 9, {**join_body, "member_id": member})
    assert joined_.error_code == ErrorCode.none
    assert (joined_.leader, joined_.member_id, joined_.protocol_name) == \
        (member, member, "range")
    assert [(m.member_id, m.metadata) for m in joined_.members] == [(member, b"sub")]
    generation = joined_.generation_id
    synced = await ask(broker, ApiKey.SYNC_GROUP, 5, {
        "group_id": "g", "generation_id": generation, "member_id": member,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b"orders-0"}]})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"orders-0")
    beat = await ask(broker, ApiKey.HEARTBEAT, 4, {
        "group_id": "g", "generation_id": generation, "member_id": member})
    assert beat.error_code == ErrorCode.none
    stale = await ask(broker, ApiKey.HEARTBEAT, 4, {
        "group_id": "g", "generation_id": generation + 1, "member_id": member})
    assert stale.error_code == ErrorCode.illegal_generation
    listed = await ask(broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == \
        [("g", "consumer", "Stable")]
    described = await ask(broker, ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": ["g"], "include_authorized_operations": False})
    (group,) = described.groups
    assert (group.error_code, group.group_state, group.protocol_data) == \
        (ErrorCode.none, "Stable", "range")
    assert [(m.member_id, m.client_host, m.member_assignment) for m in group.members] == \
        [(member, "/10.0.0.9", b"orders-0")]
    left = await ask(broker, ApiKey.LEAVE_GROUP, 5, {
        "group_id": "g", "members": [{"member_id": member, "group_instance_id": None}]})
    assert left.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in left.members] == [(member, ErrorCode.none)]
    described = await ask(broker, ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": ["g"], "include_authorized_operations": False})
    assert (described.groups[0].group_state, list(described.groups[0].members)) == \
        ("Empty", [])


async def test_delete_groups_removes_an_empty_group(broker, coordinator) -> None:
    create_topic(broker, "orders")
    await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]})
    response = await ask(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g", "ghost"]})
    assert [(g.group_id, g.error_code) for g in response.results] == [
        ("g", ErrorCode.none), ("ghost", ErrorCode.group_id_not_found)]
    described = await ask(broker, ApiKey.DESCRIBE_GROUPS, 6, {
        "groups": ["g"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.group_id_not_found


async def test_offset_delete_removes_a_partitions_committed_offset(broker, coordinator
                                                                   ) -> None:
    create_topic(broker, "orders", partitions=2)
    await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": None},
            {"partition_index": 1, "committed_offset": 6, "committed_metadata": None}]}]})
    response = await ask(broker, ApiKey.OFFSET_DELETE, 0, {
        "group_id": "g", "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0}]}]})
    assert response.error_code == ErrorCode.none
    assert [(p.partition_index, p.error_code) for p in response.topics[0].partitions] == \
        [(0, ErrorCode.none)]
    fetched_offsets = await ask(broker, ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": "g", "topics": [
            {"name": "orders", "partition_indexes": [0, 1]}]}], "require_stable": False})
    assert [(p.partition_index, p.committed_offset)
            for p in fetched_offsets.groups[0].topics[0].partitions] == [(0, -1), (1, 6)]


async def test_a_consumer_group_member_gets_an_assignment_and_commits(
        broker, coordinator) -> None:
    topic_id = create_topic(broker, "orders", partitions=3)
    response = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": "cg", "member_id": "", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["orders"],
        "server_assignor": None, "topic_partitions": []})
    assert response.error_code == ErrorCode.none
    assert response.member_id and response.member_epoch == 1
    assert [(t.topic_id, sorted(t.partitions))
            for t in response.assignment.topic_partitions] == [(topic_id, [0, 1, 2])]
    described = await ask(broker, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": ["cg", "nothing"], "include_authorized_operations": False})
    found = {g.group_id: g for g in described.groups}
    assert (found["cg"].error_code, found["cg"].group_epoch) == (ErrorCode.none, 1)
    assert [m.member_id for m in found["cg"].members] == [response.member_id]
    assert found["nothing"].error_code == ErrorCode.group_id_not_found

    create_topic(broker, "other")

    async def commit(epoch: int) -> list[Any]:
        committed = await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
            "group_id": "cg", "generation_id_or_member_epoch": epoch,
            "member_id": response.member_id, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "committed_offset": 3,
                                               "committed_metadata": None}]}
                for name in ("orders", "other")]})
        return [p.error_code for t in committed.topics for p in t.partitions]

    assert await commit(response.member_epoch) == [ErrorCode.none] * 2
    assert await commit(response.member_epoch - 1) == [ErrorCode.stale_member_epoch] * 2
    # The member's subscription keeps its topic's offsets from being deleted.
    deleted = await ask(broker, ApiKey.OFFSET_DELETE, 0, {
        "group_id": "cg", "topics": [{"name": name, "partitions": [{"partition_index": 0}]}
                                     for name in ("orders", "other")]})
    assert deleted.error_code == ErrorCode.none
    assert [(t.name, p.error_code) for t in deleted.topics for p in t.partitions] == [
        ("orders", ErrorCode.group_subscribed_to_topic), ("other", ErrorCode.none)]


def heartbeat_body(group_id: str, member_id: str = "", epoch: int = 0,
                   topics: list[str] | None = None) -> dict[str, Any]:
    return {"group_id": group_id, "member_id": member_id, "member_epoch": epoch,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
            "subscribed_topic_names": topics, "server_assignor": None,
            "topic_partitions": None if topics is None else []}


async def test_at_group_version_0_the_kip_848_apis_are_advertised_but_refused(
        broker, coordinator) -> None:
    """Kafka's KafkaApis.isConsumerGroupProtocolEnabled: with group.version 0 finalized,
    ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION (their
    getErrorResponse: the code alone), while ApiVersions still lists both (Kafka 4.4's
    ApiVersionManager does not look at features). A group formed before stays with its
    coordinator, and its member heartbeats again once group.version is back at 1."""
    create_topic(broker, "orders")
    joined = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                       heartbeat_body("cg", "m-1", topics=["orders"]))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)

    broker.image.replay(r.FeatureLevelRecord(name="group.version", feature_level=0))
    table = ApiTable("broker", broker, broker_apis())  # the broker listener's
    versions = api_versions(table).handler(broker, context(ApiKey.API_VERSIONS, 4), build(
        request_schema(ApiKey.API_VERSIONS, 4), {
            "client_software_name": "librdkafka", "client_software_version": "2.12.0"}))
    advertised = {k["api_key"]: (k["min_version"], k["max_version"])
                  for k in versions["api_keys"]}
    assert advertised[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    assert advertised[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)
    assert {"name": "group.version", "min_version": 0, "max_version": 1} in \
        versions["supported_features"]
    # Level 0 takes the feature out of the image (Kafka's FeaturesDelta): not finalized.
    assert "group.version" not in [f["name"] for f in versions["finalized_features"]]
    for body in (heartbeat_body("cg", "m-1", 1, ["orders"]),
                 heartbeat_body("new", "m-2", topics=["orders"])):
        refused = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        assert (refused.error_code, refused.error_message, refused.member_id,
                refused.member_epoch, refused.assignment) == (
            ErrorCode.unsupported_version, None, None, 0, None)
    described = await ask(broker, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
        "group_ids": ["cg", "nothing"], "include_authorized_operations": True})
    assert [(g.group_id, g.error_code, g.error_message, g.group_state, g.group_epoch,
             g.members) for g in described.groups] == [
        ("cg", ErrorCode.unsupported_version, None, "", 0, ()),
        ("nothing", ErrorCode.unsupported_version, None, "", 0, ())]
    listed = await ask(broker, ApiKey.LIST_GROUPS, 5, {"states_filter": [],
                                                       "types_filter": []})
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("cg", "consumer")]

    broker.image.replay(r.FeatureLevelRecord(name="group.version", feature_level=1))
    again = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                      heartbeat_body("cg", "m-1", 1, ["orders"]))
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, 1)


@pytest.mark.parametrize("broker", [{"group.coordinator.rebalance.protocols": "classic"}],
                         indirect=True)
async def test_without_consumer_among_the_rebalance_protocols_the_kip_848_apis_are_refused(
        broker, coordinator) -> None:
    """Kafka's other half of isConsumerGroupProtocolEnabled: the broker's
    group.coordinator.rebalance.protocols must name "consumer" (group.version 1 or not)."""
    create_topic(broker, "orders")
    refused = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                        heartbeat_body("cg", "m-1", topics=["orders"]))
    assert refused.error_code == ErrorCode.unsupported_version
    described = await ask(broker, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
        "group_ids": ["cg"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.unsupported_version


def commit_body(group_id: str, targets: dict[str, list[int]], epoch: int = -1,
                member_id: str = "", offset: int = 5) -> dict[str, Any]:
    return {"group_id": group_id, "generation_id_or_member_epoch": epoch,
            "member_id": member_id, "topics": [
                {"name": name, "partitions": [
                    {"partition_index": p, "committed_offset": offset,
                     "committed_metadata": None} for p in parts]}
                for name, parts in targets.items()]}


async def committed_offsets(broker: Broker, group_id: str) -> list[tuple[str, int, int]]:
    fetched = await ask(broker, ApiKey.OFFSET_FETCH, 7, {
        "group_id": group_id, "topics": None, "require_stable": False})
    return sorted((t.name, p.partition_index, p.committed_offset)
                  for t in fetched.topics for p in t.partitions)


async def test_a_simple_commit_to_a_missing_topic_or_partition_stores_nothing_for_it(
        broker, coordinator) -> None:
    """As Kafka's KafkaApis: unknown topics and partitions are answered
    UNKNOWN_TOPIC_OR_PARTITION, the partitions that exist are committed."""
    create_topic(broker, "orders", partitions=2)
    response = await ask(broker, ApiKey.OFFSET_COMMIT, 9, commit_body(
        "g", {"orders": [0, 7], "missing": [0, 1]}))
    assert [(t.name, p.partition_index, p.error_code)
            for t in response.topics for p in t.partitions] == [
        ("orders", 0, ErrorCode.none), ("orders", 7, ErrorCode.unknown_topic_or_partition),
        ("missing", 0, ErrorCode.unknown_topic_or_partition),
        ("missing", 1, ErrorCode.unknown_topic_or_partition)]
    assert await committed_offsets(broker, "g") == [("orders", 0, 5)]
    # Nothing that exists: the group is not even created.
    response = await ask(broker, ApiKey.OFFSET_COMMIT, 2, commit_body(
        "ghost", {"missing": [0]}))
    assert [p.error_code for p in response.topics[0].partitions] == \
        [ErrorCode.unknown_topic_or_partition]
    described = await ask(broker, ApiKey.DESCRIBE_GROUPS, 6, {
        "groups": ["ghost"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.group_id_not_found


async def test_members_of_classic_and_consumer_groups_cannot_commit_to_missing_topics(
        broker, coordinator) -> None:
    create_topic(broker, "orders")
    join_body = {"group_id": "classic", "session_timeout": 10000,
                 "rebalance_timeout": 10000, "member_id": "", "group_instance_id": None,
                 "protocol_type": "consumer", "protocols": [{"name": "range",
                                                             "metadata": b""}],
                 "reason": None}
    member = (await ask(broker, ApiKey.JOIN_GROUP, 9, join_body)).member_id
    joined_ = await ask(broker, ApiKey.JOIN_GROUP, 9, {**join_body, "member_id": member})
    await ask(broker, ApiKey.SYNC_GROUP, 5, {
        "group_id": "classic", "generation_id": joined_.generation_id, "member_id": member,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b""}]})
    heartbeat = await ask(broker, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, {
        "group_id": "kip848", "member_id": "", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 30000, "subscribed_topic_names": ["orders"],
        "server_assignor": None, "topic_partitions": []})
    for group_id, epoch, member_id in (
            ("classic", joined_.generation_id, member),
            ("kip848", heartbeat.member_epoch, heartbeat.member_id)):
        response = await ask(broker, ApiKey.OFFSET_COMMIT, 9, commit_body(
            group_id, {"orders": [0], "missing": [0]}, epoch, member_id))
        assert [(t.name, p.error_code) for t in response.topics for p in t.partitions] == [
            ("orders", ErrorCode.none), ("missing", ErrorCode.unknown_topic_or_partition)]
        assert await committed_offsets(broker, group_id) == [("orders", 0, 5)]


async def test_read_committed_stops_at_the_last_stable_offset_and_names_the_aborted(
        broker) -> None:
    """A read_committed fetch stops before the oldest open transaction and lists the
    aborted transactions of what it returns; read_uncommitted reads to the high
    watermark; ListOffsets read_committed answers the last stable offset."""
    create_topic(broker, "orders")
    partition = broker.replica_manager.partitions[("orders", 0)]
    append = broker.replica_manager.append
    append(partition, batch(b"t1", producer_id=7, producer_epoch=0, base_sequence=0,
                            transactional=True), 1, NOW_MS)  # 0, open
    append(partition, batch(b"plain"), 1, NOW_MS)  # 1
    committed = {**fetch_body("orders", (0, 0, 1 << 20)), "isolation_level": 1}
    p = fetched(await ask(broker, ApiKey.FETCH, 12, committed))[0]
    assert (p.high_watermark, p.last_stable_offset, values_of(p.records or b"")) == (2, 0, [])
    p = fetched(await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 0, 1 << 20))))[0]
    assert [v for _, v in values_of(p.records)] == [b"t1", b"plain"]
    offsets = await ask(broker, ApiKey.LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 1, "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert offsets.topics[0].partitions[0].offset == 0
    broker.replica_manager.append_marker(partition, 7, 0, False, 0, NOW_MS)  # 2
    p = fetched(await ask(broker, ApiKey.FETCH, 12, committed))[0]
    assert (p.last_stable_offset, p.high_watermark) == (3, 3)
    assert [v for _, v in values_of(p.records)][:2] == [b"t1", b"plain"]
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(7, 0)]


# --- share groups on the leader ----------------------------------------------------------

def share_fetch_body(topic_id: Any, member: str, epoch: int,
                     acks: tuple[tuple[int, int, list[int]], ...] = ()) -> dict[str, Any]:
    return {"group_id": "workers", "member_id": member, "share_session_epoch": epoch,
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500,
            "batch_size": 500, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                    for f, last, types in acks]}]}],
            "forgotten_topics_data": []}


def share_ack_body(topic_id: Any, member: str, epoch: int, first: int, last: int,
                   kind: int) -> dict[str, Any]:
    return {"group_id": "workers", "member_id": member, "share_session_epoch": epoch,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0,
                       "acknowledgement_batches": [{"first_offset": first, "last_offset": last,
                                                    "acknowledge_types": [kind]}]}]}]}


def acquired(response: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


async def test_a_share_fetch_sends_only_the_batches_it_acquired(broker) -> None:
    """KIP-932: a member whose ShareFetch may take 4 records gets the batches holding
    them and nothing after (Kafka slices the fetched records to the acquired ones); the
    next member gets the next batches. Sending the whole backlog up to MaxBytes with
    every fetch made each one cost what remained of the topic."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    for i in range(0, 30, 3):
        await produce_ok(broker, "jobs", 0, batch(*(b"%d" % n for n in range(i, i + 3))))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    small = {**share_fetch_body(topic_id, "m1", 0), "max_records": 4, "batch_size": 4,
             "max_bytes": 50 << 20}
    first = await ask(broker, ApiKey.SHARE_FETCH, 1, small)
    assert acquired(first) == [(0, 2, 1), (3, 5, 1)]  # whole batches
    assert [v for _, v in values_of(first.responses[0].partitions[0].records)] == \
        [b"%d" % n for n in range(6)]
    second = await ask(broker, ApiKey.SHARE_FETCH, 1, {**small, "member_id": "m2"})
    assert acquired(second) == [(6, 8, 1), (9, 11, 1)]
    assert [v for _, v in values_of(second.responses[0].partitions[0].records)] == \
        [b"%d" % n for n in range(6, 12)]


async def test_share_fetch_leases_records_to_one_member_at_a_time(broker) -> None:
    """KIP-932 on the leader: a member's ShareFetch acquires the records (from the log
    start with share.auto.offset.reset=earliest), another member gets none of them while
    they are held; RELEASE gives them back with a higher delivery count; an ACCEPT by
    the holder settles them, anyone else's acknowledgement is INVALID_RECORD_STATE; share
    sessions check their epochs."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    persister = ShardPersister()
    broker.share_partitions = SharePartitionManager(broker, persister)
    first = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m1", 0))
    assert acquired(first) == [(0, 2, 1)]
    assert [v for _, v in values_of(first.responses[0].partitions[0].records)] == \
        [b"a", b"b", b"c"]
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m2", 0))) == []
    released = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                         share_ack_body(topic_id, "m1", 1, 0, 2, 2))
    assert released.responses[0].partitions[0].error_code == ErrorCode.none
    again = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m2", 1))
    assert acquired(again) == [(0, 2, 2)]
    stolen = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                       share_ack_body(topic_id, "m1", 2, 0, 2, 1))
    assert stolen.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
    done = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(
        topic_id, "m2", 2, acks=((0, 2, [1]),)))
    assert done.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
    key = SharePartitionKey("workers", topic_id, 0)
    assert broker.share_partitions.partitions[key].start_offset == 3
    # Written first, with the start offset it found (as Kafka: the next write carries
    # the one it moved): a new leader starts after the records.
    from ottla.broker.share.share_partition import RecordState, SharePartition
    from ottla.coordinator.share.state import PersisterStateBatch
    state = await persister.read_state("workers", topic_id, 0, 0)
    assert (state.error, state.start_offset, state.batches) == (
        ErrorCode.none, 0, [PersisterStateBatch(0, 2, RecordState.ACKNOWLEDGED, 2)])
    assert SharePartition.from_state(state.start_offset, state.batches).start_offset == 3
    stale = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m2", 7))
    assert stale.error_code == ErrorCode.invalid_share_session_epoch
    unknown = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m9", 4))
    assert unknown.error_code == ErrorCode.share_session_not_found
    broker.share_partitions.shutdown()


async def test_an_acknowledgement_is_answered_only_once_its_state_is_written(broker) -> None:
    """Seed 001's persist-before-commit through ShareAcknowledge: while the share
    coordinator refuses writes the member's ACCEPT is answered with the error and the
    records stay its own (no other member gets them, the start offset stays); once
    writes go through the same ACCEPT settles them, and a new leader reading the state
    starts after them."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    persister = ShardPersister()
    broker.share_partitions = SharePartitionManager(broker, persister)
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m1", 0))) == [(0, 2, 1)]
    persister.fail_writes = True
    refused = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                        share_ack_body(topic_id, "m1", 1, 0, 2, 1))
    assert refused.responses[0].partitions[0].error_code == \
        ErrorCode.coordinator_not_available
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m2", 0))) == []
    key = SharePartitionKey("workers", topic_id, 0)
    assert broker.share_partitions.partitions[key].start_offset == 0
    persister.fail_writes = False
    accepted = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                         share_ack_body(topic_id, "m1", 2, 0, 2, 1))
    assert accepted.responses[0].partitions[0].error_code == ErrorCode.none
    broker.share_partitions.shutdown()
    restarted = SharePartitionManager(broker, persister)
    broker.share_partitions = restarted
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m3", 0))) == []
    assert restarted.partitions[key].start_offset == 3
    restarted.shutdown()


async def test_a_share_fetch_that_may_take_nothing_is_answered_at_once(broker) -> None:
    """As Kafka's SharePartitionManager: MaxBytes 0 (what the Java client sends when it
    only acknowledges) or MaxRecords 0 acquires nothing and does not wait, even with
    records there and a long MaxWait; the acknowledgements riding on it still apply."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    held = await ask(broker, ApiKey.SHARE_FETCH, 1, share_fetch_body(topic_id, "m1", 0))
    assert acquired(held) == [(0, 2, 1)]
    for epoch, limits in ((1, {"max_bytes": 0}), (2, {"max_records": 0})):
        body = {**share_fetch_body(topic_id, "m1", epoch,
                                   acks=((0, 0, [1]),) if epoch == 1 else ()),
                "max_wait": 60_000, **limits}
        if epoch == 2:  # release 1-2 first so that records are there to take
            released = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 1,
                                 share_ack_body(topic_id, "m1", 2, 1, 2, 2))
            assert released.responses[0].partitions[0].error_code == ErrorCode.none
            body["share_session_epoch"] = 3
        answer = await asyncio.wait_for(ask(broker, ApiKey.SHARE_FETCH, 1, body), 5)
        assert acquired(answer) == [], limits
    key = SharePartitionKey("workers", topic_id, 0)
    assert broker.share_partitions.partitions[key].start_offset == 1  # offset 0 accepted
    broker.share_partitions.shutdown()


async def test_a_waiting_share_fetch_takes_what_an_acknowledgement_releases(broker) -> None:
    """A ShareFetch that finds nothing waits in the purgatory (Kafka's DelayedShareFetch)
    and is completed by the other member's RELEASE, before that member fetches again."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m1", 0))) == [(0, 2, 1)]
    waiting = asyncio.ensure_future(ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m2", 0), "max_wait": 60_000}))
    async with asyncio.timeout(5):  # nothing to take yet: it parks
        while broker.share_partitions.fetch_purgatory.watched() != 1:
            await asyncio.sleep(0.01)
    assert not waiting.done()
    released = await ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m1", 1, acks=((0, 2, [2]),)), "max_wait": 0})
    assert acquired(released) == []  # the waiting member took them first
    assert acquired(await asyncio.wait_for(waiting, 5)) == [(0, 2, 2)]
    broker.share_partitions.shutdown()


async def test_share_fetch_v2_limits_records_and_share_acknowledge_v2_renews(broker) -> None:
    """ShareFetch v2's ShareAcquireMode 1 (share.acquire.mode=record_limit) acquires exactly
    MaxRecords; ShareAcknowledge v2 with IsRenewAck renews a lock (RENEW, KIP-1222) and
    answers the lock duration; RENEW in a request that does not say so is refused."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c", b"d"))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    limited = await ask(broker, ApiKey.SHARE_FETCH, 2, {
        **share_fetch_body(topic_id, "m1", 0), "max_records": 2, "share_acquire_mode": 1})
    assert acquired(limited) == [(0, 1, 1)]
    refused = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 2, {
        **share_ack_body(topic_id, "m1", 1, 0, 1, 4), "is_renew_ack": False})
    assert refused.responses[0].partitions[0].error_code == ErrorCode.invalid_request
    renewed = await ask(broker, ApiKey.SHARE_ACKNOWLEDGE, 2, {
        **share_ack_body(topic_id, "m1", 2, 0, 1, 4), "is_renew_ack": True})
    assert renewed.responses[0].partitions[0].error_code == ErrorCode.none
    assert renewed.acquisition_lock_timeout == timedelta(milliseconds=30_000)
    sp = broker.share_partitions.partitions[SharePartitionKey("workers", topic_id, 0)]
    assert sp.acquired_count() == 2 and sp.start_offset == 0
    broker.share_partitions.shutdown()


WALL_CLOCK_STEPS = [pytest.param(600_000, id="ahead"), pytest.param(-600_000, id="back")]
"""An NTP step (or the chaos run's clock-skew) of the broker's wall clock: ten minutes."""


def step_wall_clock(broker: Broker, step_ms: int) -> None:
    broker.clock = lambda: (NOW_MS + step_ms) / 1000


@pytest.mark.parametrize("broker", [{"group.share.min.record.lock.duration.ms": "1000"}],
                         indirect=True)
@pytest.mark.parametrize("step_ms", WALL_CLOCK_STEPS)
async def test_acquisition_locks_last_their_duration_whatever_the_wall_clock_does(
        broker, step_ms: int) -> None:
    """Kafka times acquisition locks on its monotonic clock (SharePartition's timer tasks,
    ``hiResClockMs``). m1 holds records under the 30 s default lock, then m2 holds others
    under a 1 s lock (the group's config changed); the wall clock steps ten minutes ahead
    or back. m2's lock ends after its second and a waiting member gets those records, but
    not m1's: a step ahead ends no lock early, a step back holds none."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    await produce_ok(broker, "jobs", 0, batch(b"d", b"e", b"f"))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    one_batch = {"max_records": 3, "batch_size": 3}
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m1", 0), **one_batch})) == [(0, 2, 1)]
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.record.lock.duration.ms", value="1000"))
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m2", 0), **one_batch})) == [(3, 5, 1)]
    step_wall_clock(broker, step_ms)
    waiting = ask(broker, ApiKey.SHARE_FETCH, 1, {**share_fetch_body(topic_id, "m3", 0),
                                                  "max_wait": 10_000})
    assert acquired(await asyncio.wait_for(waiting, 15)) == [(3, 5, 2)]


@pytest.mark.parametrize("step_ms", WALL_CLOCK_STEPS)
async def test_a_waiting_share_fetch_waits_its_max_wait_whatever_the_wall_clock_does(
        broker, step_ms: int) -> None:
    """Kafka's DelayedShareFetch times out on its purgatory's monotonic timer. With m1
    holding every record, m2 waits up to 60 s and m3 up to 300 ms; the wall clock steps
    ten minutes ahead or back. m3 is answered (empty) after its 300 ms and m2 still
    waits: a step ahead ends no wait early, a step back holds none."""
    from ottla.broker.share.partition_manager import SharePartitionManager
    from tests.share_state import ShardPersister

    topic_id = create_topic(broker, "jobs")
    broker.image.replay(r.ConfigRecord(resource_type=ConfigResourceType.GROUP,
                                       resource_name="workers",
                                       name="share.auto.offset.reset", value="earliest"))
    await produce_ok(broker, "jobs", 0, batch(b"a", b"b", b"c"))
    broker.share_partitions = SharePartitionManager(broker, ShardPersister())
    purgatory = broker.share_partitions.fetch_purgatory
    assert acquired(await ask(broker, ApiKey.SHARE_FETCH, 1,
                              share_fetch_body(topic_id, "m1", 0))) == [(0, 2, 1)]
    long_wait = asyncio.ensure_future(ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m2", 0), "max_wait": 60_000}))
    short_wait = asyncio.ensure_future(ask(broker, ApiKey.SHARE_FETCH, 1, {
        **share_fetch_body(topic_id, "m3", 0), "max_wait": 300}))
    async with asyncio.timeout(5):  # nothing to take: both park
        while purgatory.watched() != 2:
            await asyncio.sleep(0.01)
    step_wall_clock(broker, step_ms)  # within m3's 300 ms: polled every 10 ms
    assert acquired(await asyncio.wait_for(short_wait, 10)) == []
    assert purgatory.watched() == 1 and not long_wait.done()
    long_wait.cancel()


async def test_describe_producers_is_answered_by_a_follower_from_what_it_replicated(
        broker) -> None:
    """As Kafka's ``ReplicaManager.activeProducerState``: any hosted replica answers, and a
    broker hosting none of a known partition answers NOT_LEADER_OR_FOLLOWER."""
    create_topic(broker, "orders", leader=OTHER, replicas=(OTHER, NODE))
    create_topic(broker, "elsewhere", leader=OTHER, replicas=(OTHER,))
    follower = broker.replica_manager.partitions[("orders", 0)]
    assert not follower.is_leader
    follower.append_as_follower(batch(b"a", b"b", producer_id=4242, producer_epoch=3,
                                      base_sequence=0, partition_leader_epoch=0), NOW_MS)
    response = await ask(broker, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "orders", "partition_indexes": [0]},
        {"name": "elsewhere", "partition_indexes": [0]}]})
    here, elsewhere = (t.partitions[0] for t in response.topics)
    (active,) = here.active_producers
    assert (here.error_code, active.producer_id, active.producer_epoch,
            active.last_sequence, active.last_timestamp) == (ErrorCode.none, 4242, 3, 1, NOW_MS)
    assert (elsewhere.error_code, list(elsewhere.active_producers)) == \
        (ErrorCode.not_leader_or_follower, [])
