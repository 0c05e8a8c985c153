"""Records produced by real clients come back identical: confluent-kafka (librdkafka),
kafka-python and aiokafka, every compression codec, keys, headers and timestamps."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess, wait_until
from tests.segments import CODEC_IDS, stored_codecs

PARTITIONS = 6
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    node = OttlaProcess(str(tmp_path_factory.mktemp("produce") / "data")).start()
    yield node
    assert node.stop() == 0, node.log()


def make_topic(node: OttlaProcess, name: str, partitions: int = PARTITIONS, **config) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)],
                        operation_timeout=10)[name].result()


def expected_records(n: int, base_ts: int) -> list[tuple[bytes, bytes, list, int]]:
    return [(f"key-{i % 977}".encode(), f"value-{i}-".encode() * (1 + i % 7),
             [("seq", str(i).encode()), ("empty", b"")], base_ts + i) for i in range(n)]


def consume_all(node: OttlaProcess, topic: str, count: int, partitions: int = PARTITIONS,
                timeout: float = 120) -> dict[int, list]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"reader-{topic}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got: dict[int, list] = defaultdict(list)
    received = 0
    deadline = time.monotonic() + timeout
    while received < count and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            assert msg.error() is None, msg.error()
            got[msg.partition()].append((msg.offset(), msg.key(), msg.value(),
                                         [(k, v) for k, v in (msg.headers() or [])],
                                         msg.timestamp()[1]))
            received += 1
    consumer.close()
    assert received == count, f"consumed {received} of {count}"
    return got


def assert_stored_with(node: OttlaProcess, topic: str, partitions: int,
                       codec: str | None, may_send_uncompressed: bool = False) -> None:
    """Every batch the client's records made is on disk with the codec it was asked for
    (the topic's compression.type is ``producer``: the broker keeps the client's).
    ``may_send_uncompressed``: kafka-python and aiokafka send a batch uncompressed when
    compressing does not make it smaller (their ``_maybe_compress``), as a batch of one
    small record can be; the others must still carry the codec."""
    codecs = stored_codecs(node.data_dir, topic, partitions)
    assert codecs, "nothing was stored"
    asked = CODEC_IDS[codec or "none"]
    allowed = {asked, CODEC_IDS["none"]} if may_send_uncompressed else {asked}
    assert set(codecs) <= allowed and asked in codecs, \
        f"the client was asked for {codec}; the log holds codecs {sorted(set(codecs))}"


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip_with_each_codec(node, codec: str) -> None:
    topic = f"ck-{codec}"
    make_topic(node, topic)
    records = expected_records(20_000, 1_700_000_000_000)
    producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": codec,
                         "linger.ms": 20, "acks": "all", "enable.idempotence": True})
    sent: dict[int, list] = defaultdict(list)
    errors = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            sent[msg.partition()].append((msg.offset(), msg.key(), msg.value()))

    for key, value, headers, ts in records:
        while True:
            try:
                producer.produce(topic, value, key, headers=headers, timestamp=ts,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0 and not errors
    got = consume_all(node, topic, len(records))
    by_key = {(k, v): (h, ts) for k, v, h, ts in records}
    for partition, rows in got.items():
        assert [r[0] for r in rows] == list(range(len(rows))), "offsets are dense and ordered"
        assert [(o, k, v) for o, k, v, _, _ in rows] == sent[partition]
        for _, key, value, headers, ts in rows:
            assert (headers, ts) == by_key[(key, value)]
    # Same key, same partition, in produce order:
    assert len({p for p, rows in got.items() for r in rows if r[1] == b"key-5"}) == 1
    assert_stored_with(node, topic, PARTITIONS, codec)


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(node, codec: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = f"kp-{codec}"
    make_topic(node, topic, 3)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, compression_type=codec,
                             linger_ms=10)
    records = expected_records(3000, 1_700_000_000_000)
    futures = [producer.send(topic, value=v, key=k, headers=h, timestamp_ms=ts)
               for k, v, h, ts in records]
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    # consumer_timeout_ms is an idle limit between messages, and the first one waits for the
    # connection, metadata and ListOffsets: be generous, and stop once everything is in.
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=30000)
    consumer.assign([KTP(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    got = {}
    for m in consumer:
        got[(m.partition, m.offset)] = (m.key, m.value, list(m.headers), m.timestamp)
        if len(got) == len(records):
            break
    consumer.close()
    assert len(got) == len(records)
    for meta, (k, v, h, ts) in zip(metas, records):
        assert got[(meta.partition, meta.offset)] == (k, v, h, ts)
    assert_stored_with(node, topic, 3, codec, may_send_uncompressed=True)


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_round_trip(node, codec: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    topic = f"aio-{codec}"
    make_topic(node, topic, 3)
    records = expected_records(3000, 1_700_000_000_000)

    async def run() -> tuple[list, dict]:
        producer = AIOKafkaProducer(bootstrap_servers=node.bootstrap, compression_type=codec,
                                    linger_ms=10, enable_idempotence=True)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, headers=h, timestamp_ms=ts)
                       for k, v, h, ts in records]
            metas = [await f for f in futures]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=node.bootstrap, enable_auto_commit=False)
        await consumer.start()
        got = {}
        try:
            consumer.assign([ATP(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            deadline = time.monotonic() + 60
            while len(got) < len(records) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for msgs in batches.values():
                    for m in msgs:
                        got[(m.partition, m.offset)] = (m.key, m.value, list(m.headers),
                                                        m.timestamp)
        finally:
            await consumer.stop()
        return metas, got

    metas, got = asyncio.run(run())
    assert len(got) == len(records)
    for meta, (k, v, h, ts) in zip(metas, records):
        assert got[(meta.partition, meta.offset)] == (k, v, h, ts)
    assert_stored_with(node, topic, 3, codec, may_send_uncompressed=True)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_mode_stores_the_records(node, acks: str) -> None:
    topic = f"acks-{acks}"
    make_topic(node, topic, 1)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": acks, "linger.ms": 5})
    for i in range(500):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0
    got = wait_until(lambda: (lambda r: r if len(r.get(0, [])) == 500 else None)(
        consume_all(node, topic, 500, partitions=1, timeout=10)), timeout=30)
    assert [v for _, _, v, _, _ in got[0]] == [f"m{i}".encode() for i in range(500)]


def test_log_append_time_topics_stamp_broker_time(node) -> None:
    topic = "append-time"
    make_topic(node, topic, 1, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce(topic, b"x", timestamp=1000)
    assert producer.flush(10) == 0
    rows = consume_all(node, topic, 1, partitions=1)[0]
    after = int(time.time() * 1000)
    assert before <= rows[0][4] <= after


def test_a_topic_of_many_partitions_serves_every_partition_and_survives_a_restart(
        tmp_path) -> None:
    """A running broker opens a big topic's logs a slice of loop time at a time: a client
    may meet NOT_LEADER_OR_FOLLOWER for a partition whose log is not open yet and retries,
    every partition ends up serving, and after a restart nothing produced is gone."""
    partitions = 400
    node = OttlaProcess(str(tmp_path / "data")).start()
    try:
        make_topic(node, "wide", partitions)
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        for p in range(partitions):
            producer.produce("wide", value=b"v%d" % p, partition=p)
        assert producer.flush(60) == 0
        assert node.stop() == 0, node.log()
        node.start()
        got = consume_all(node, "wide", partitions, partitions)
        assert {p: [m[2] for m in msgs] for p, msgs in got.items()} == \
            {p: [b"v%d" % p] for p in range(partitions)}
    finally:
        node.stop()
