"""reader=columnar (Fetch + the compiled decoder) returns exactly what reader=consumer
(confluent-kafka) returns: the same DataFrames, every column including headers and
timestamps, over every codec, LogAppendTime, committed, aborted and open transactions
under both isolation levels, a compacted topic with gaps, and a retention-truncated
start; and the same range-by-range, where ranges start or end on markers and gaps."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from ottla.spark.arrow_records import arrow_schema
from ottla.spark.fetch_reader import read_range_columnar, unusable_because
from ottla.spark.offset_reader import DataLossError, OffsetRange
from ottla.spark.partition_reader import read_range
from ottla.storage.checkpoint import read_offsets
from ottla.storage.cleaner import CLEANER_CHECKPOINT
from tests.helpers import OttlaProcess, free_port, wait_until
from tests.spark.test_isolation_level import committed, names, send

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
FAST = {"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"}


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory) -> Iterator[OttlaProcess]:
    """A broker whose cleaner and retention run every 200 ms."""
    node = OttlaProcess(str(tmp_path_factory.mktemp("columnar-broker") / "data"),
                        overrides=FAST).start()
    try:
        yield node
    finally:
        node.stop()


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config=configs)
    admin.create_topics([new])[topic].result(30)


def messages(rng: random.Random, n: int, partitions: int) -> Iterator[dict[str, Any]]:
    """Null and empty keys and values, headers with null values, sizes up to 20 KiB."""
    for i in range(n):
        size = rng.choice([0, 1, 100, 1000, rng.randint(0, 20_000)])
        yield {"partition": i % partitions,
               "key": None if i % 7 == 0 else rng.randbytes(rng.randint(0, 12)),
               "value": None if i % 11 == 0 else rng.randbytes(size),
               "headers": [("n", str(i).encode()), ("null", None), ("é", b"")][:i % 4]}


def fill(bootstrap: str, topic: str, items: Iterator[dict[str, Any]], **config: Any) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True, **config})
    for m in items:
        producer.produce(topic, **m)
        producer.poll(0)
    assert producer.flush(30) == 0


def spark_rows(spark, bootstrap: str, reader: str, **options: str) -> list[Any]:
    r = spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap) \
        .option("includeHeaders", "true").option("reader", reader)
    for key, value in options.items():
        r = r.option(key, value)
    return r.load().orderBy("topic", "partition", "offset").collect()


def same_dataframes(spark, bootstrap: str, **options: str) -> list[Any]:
    """The rows both readers return (asserted equal), in topic-partition-offset order."""
    columnar = spark_rows(spark, bootstrap, "columnar", **options)
    consumer = spark_rows(spark, bootstrap, "consumer", **options)
    assert len(columnar) == len(consumer)
    for a, b in zip(columnar, consumer):
        assert a == b
    return columnar


def read_both(bootstrap: str, r: OffsetRange, isolation: str = "read_uncommitted",
              fail_on_data_loss: bool = True) -> pa.Table:
    """One range through both readers, outside Spark; the (equal) table."""
    client = {"bootstrap.servers": bootstrap}
    schema = arrow_schema(True)
    tables = [pa.Table.from_batches(list(read(r, client, True, fail_on_data_loss, 20_000,
                                              isolation)), schema)
              for read in (read_range_columnar, read_range)]
    assert tables[0].to_pylist() == tables[1].to_pylist(), r
    return tables[0]


def log_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "columnar-tests"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def test_columnar_is_usable_here_and_only_in_plaintext() -> None:
    assert unusable_because({"bootstrap.servers": "x"}) is None
    assert unusable_because({"security.protocol": "SASL_SSL"}) == "security.protocol is sasl_ssl"
    assert unusable_because({"ssl.ca.location": "/ca"}) == "ssl.ca.location is set"


def test_spark_workers_read_columnar(spark):
    """The comparisons below would compare the consumer reader with itself if the
    Python workers fell back to it."""
    def why(_: int) -> str | None:
        from ottla.spark.fetch_reader import unusable_because

        return unusable_because({"bootstrap.servers": "127.0.0.1:9092"})

    assert spark.sparkContext.parallelize([0, 1], 2).map(why).collect() == [None, None]


def test_every_codec_and_log_append_time(spark, broker, topic):
    rng = random.Random(21)
    topics = []
    for codec in CODECS:
        name = f"{topic}-{codec}"
        create(broker.bootstrap, name, 2)
        fill(broker.bootstrap, name, messages(rng, 300, 2), **{"compression.type": codec})
        topics.append(name)
    appended = f"{topic}-append"
    create(broker.bootstrap, appended, 2, **{"message.timestamp.type": "LogAppendTime"})
    fill(broker.bootstrap, appended, messages(rng, 200, 2), **{"compression.type": "lz4"})
    topics.append(appended)

    rows = same_dataframes(spark, broker.bootstrap, subscribe=",".join(topics))
    assert len(rows) == 5 * 300 + 200
    assert {r["timestampType"] for r in rows if r["topic"] == appended} == {1}
    assert {r["timestampType"] for r in rows if r["topic"] != appended} == {0}
    assert any(r["key"] is None for r in rows) and any(r["value"] is None for r in rows)
    assert any(h["value"] is None for r in rows for h in r["headers"])
    # Split ranges (offsets in the middle of compressed batches) agree too.
    split = same_dataframes(spark, broker.bootstrap, subscribe=",".join(topics[:2]),
                            maxRecordsPerPartition="50")
    assert len(split) == 600


@contextmanager
def transaction(bootstrap: str, transactional_id: str, codec: str) -> Iterator[Producer]:
    """A producer inside a begun transaction, compressing with ``codec``."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, "compression.type": codec,
                         # Left open across many reads: not aborted by the broker's
                         # timeout (librdkafka's default is 60 s) on a slow machine.
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    yield producer


@pytest.fixture
def transactions_topic(broker, topic) -> Iterator[str]:
    """Two partitions: a transaction (lz4) aborted while another producer commits between
    its first record and its marker, plain records, a committed transaction (gzip), and
    one left open with a committed one after it."""
    create(broker.bootstrap, topic, 2)
    with transaction(broker.bootstrap, f"{topic}-a", "lz4") as aborting:
        send(aborting, topic, names("a", 6))
        with transaction(broker.bootstrap, f"{topic}-c", "none") as committing:
            committing.produce(topic, b"between", partition=0)
            send(committing, topic, names("c", 4))
            committing.commit_transaction(30)
        send(aborting, topic, names("a2-", 4))
        aborting.abort_transaction(30)
    fill(broker.bootstrap, topic, ({"partition": i % 2, "value": v}
                                   for i, v in enumerate(names("p", 4))))
    with transaction(broker.bootstrap, f"{topic}-z", "gzip") as zipped:
        zipped.produce(topic, b"zz", partition=1)
        zipped.flush(30)
        zipped.commit_transaction(30)
    with transaction(broker.bootstrap, f"{topic}-open", "zstd") as open_txn:
        send(open_txn, topic, names("o", 4))
        committed(broker.bootstrap, topic, names("late", 2))
        yield topic
        open_txn.abort_transaction(30)


def test_transactions_committed_aborted_and_open(spark, broker, transactions_topic):
    topic = transactions_topic
    iso = "kafka.isolation.level"
    stable = same_dataframes(spark, broker.bootstrap, subscribe=topic,
                             **{iso: "read_committed"})
    values = sorted(bytes(r["value"]) for r in stable)
    assert values == sorted([b"between", *names("c", 4), *names("p", 4), b"zz"])
    everything = same_dataframes(spark, broker.bootstrap, subscribe=topic,
                                 **{iso: "read_uncommitted"})
    assert len(everything) == 1 + 4 + 6 + 4 + 4 + 1 + 4 + 2
    same_dataframes(spark, broker.bootstrap, subscribe=topic, maxRecordsPerPartition="3",
                    **{iso: "read_committed"})

    # Outside Spark: every range starting at 0, every range ending at the end, so ranges
    # start and end on markers, aborted records and the open transaction.
    for partition in (0, 1):
        _low, high = log_offsets(broker.bootstrap, topic, partition)
        for isolation in ("read_committed", "read_uncommitted"):
            for end in range(1, high + 1):
                read_both(broker.bootstrap, OffsetRange(topic, partition, 0, end), isolation)
        for start in range(high):
            read_both(broker.bootstrap, OffsetRange(topic, partition, start, high))


def test_compacted_topic_with_gaps(spark, fast_broker, topic):
    create(fast_broker.bootstrap, topic, 1, **{
        "cleanup.policy": "compact", "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01"})
    rng = random.Random(3)
    fill(fast_broker.bootstrap, topic,
         ({"partition": 0, "key": b"k%d" % rng.randrange(30), "value": rng.randbytes(60),
           "headers": [("i", b"%d" % i)]} for i in range(2000)),
         **{"batch.size": 2048, "compression.type": "zstd"})

    def compacted() -> bool:
        consumer = Consumer({"bootstrap.servers": fast_broker.bootstrap,
                             "group.id": "columnar-tests", "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, 0, 0)])
        count = 0
        try:
            while True:
                msg = consumer.poll(10)
                if msg is None or msg.error():
                    return count < 1000
                count += 1
        finally:
            consumer.close()

    wait_until(compacted, 60, 0.5, "the cleaner to compact")
    # Passes that ran while the topic was being filled leave a dirty tail; the two readers
    # must see one log, so wait until the cleaner has reached the active segment (its
    # checkpoint is written after each swap) and has nothing left to clean.
    wait_until(lambda: cleaned_up_to_active_segment(fast_broker.data_dir, topic), 60, 0.2,
               "the cleaner to reach the active segment")
    rows = same_dataframes(spark, fast_broker.bootstrap, subscribe=topic)
    offsets = [r["offset"] for r in rows]
    assert offsets[-1] - offsets[0] + 1 > len(offsets)  # there are gaps
    _low, high = log_offsets(fast_broker.bootstrap, topic, 0)
    # Ranges whose ends fall in gaps, and a tail with nothing left before its end.
    gaps = [o + 1 for o, n in pairwise(offsets) if n > o + 1]
    for start, end in [(0, high), (gaps[0], gaps[-1]), (gaps[1], gaps[1] + 1),
                       (0, gaps[2]), (gaps[3], high)]:
        read_both(fast_broker.bootstrap, OffsetRange(topic, 0, start, end))


def cleaned_up_to_active_segment(data_dir: str, topic: str) -> bool:
    active = max(int(name[:-len(".log")]) for name in os.listdir(f"{data_dir}/{topic}-0")
                 if name.endswith(".log"))
    cleaned = read_offsets(os.path.join(data_dir, CLEANER_CHECKPOINT)).get((topic, 0))
    return cleaned == active


def stop_retention(bootstrap: str, topic: str) -> None:
    """Retention.bytes back to unlimited, waited for on the broker: the log start stops
    moving, so the earliest offset a test reads stays the earliest while Spark plans
    (a retention pass between the two would be real data loss for the query)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([resource])[resource].result(30)

    def unlimited() -> bool:
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC,
                                                           topic)])
        configs = next(iter(described.values())).result(30)
        return configs["retention.bytes"].value == "-1"
    wait_until(unlimited, 30, 0.1, "the broker to see retention.bytes=-1")


def test_retention_truncated_start(spark, fast_broker, topic):
    create(fast_broker.bootstrap, topic, 1, **{"segment.bytes": "4096",
                                               "retention.bytes": "8192"})
    rng = random.Random(5)
    fill(fast_broker.bootstrap, topic,
         ({"partition": 0, "key": b"%d" % i, "value": rng.randbytes(100)}
          for i in range(400)), **{"batch.size": 1024})
    wait_until(lambda: log_offsets(fast_broker.bootstrap, topic, 0)[0] > 0, 30, 0.2,
               "retention to delete the oldest segments")
    stop_retention(fast_broker.bootstrap, topic)
    low, high = log_offsets(fast_broker.bootstrap, topic, 0)

    rows = same_dataframes(spark, fast_broker.bootstrap, subscribe=topic)
    assert [r["offset"] for r in rows][:1] == [low]
    pinned = {"startingOffsets": json.dumps({topic: {"0": 0}}), "failOnDataLoss": "false"}
    same_dataframes(spark, fast_broker.bootstrap, subscribe=topic, **pinned)

    table = read_both(fast_broker.bootstrap, OffsetRange(topic, 0, 0, high),
                      fail_on_data_loss=False)
    assert table.column("offset")[0].as_py() == low
    messages_seen = []
    for read in (read_range_columnar, read_range):
        with pytest.raises(DataLossError) as e:
            list(read(OffsetRange(topic, 0, 1, high), {"bootstrap.servers":
                                                       fast_broker.bootstrap},
                      False, True, 20_000, "read_uncommitted"))
        messages_seen.append(str(e.value))
    assert messages_seen[0] == messages_seen[1]
    assert f"Cannot fetch offset 1 of {topic}-0: the earliest available offset is {low}" \
        in messages_seen[0]


def test_new_partition_ranges_start_at_earliest(broker, topic):
    """Streaming gives a new partition the range (-2, end): earliest is looked up."""
    create(broker.bootstrap, topic, 1)
    fill(broker.bootstrap, topic, ({"partition": 0, "value": b"%d" % i} for i in range(50)))
    table = read_both(broker.bootstrap, OffsetRange(topic, 0, -2, 50))
    assert table.column("offset").to_pylist() == list(range(50))


def test_a_leader_that_cannot_be_reached_times_out_with_the_reason(topic):
    r = OffsetRange(topic, 0, 0, 10)
    client = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    with pytest.raises(TimeoutError, match="no bootstrap server answered"):
        list(read_range_columnar(r, client, False, True, 300))
