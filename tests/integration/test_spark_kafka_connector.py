"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10 4.2.0 on PySpark
4.3.0) against Ottla, and beside Ottla's ``format("ottla")`` on the same topics.

A user who moves a job between the two formats must see the same rows: batch reads of every
codec, of committed and aborted transactions under both isolation levels, of a compacted
topic after cleaning, and of explicit per-partition offset ranges; a Structured Streaming
read; and a batch write that a plain client reads back. The connector's jars are resolved
by ``make kafka-ref`` (tests.kafka_ref.spark_kafka); without Java 17+ or Maven, or if Maven
fails, the tests fail with the reason.

The two formats declare the same schema (key, value, topic, partition, offset, timestamp,
timestampType, headers), so rows are compared as collected, with no normalisation beyond
turning ``bytearray`` into ``bytes`` and sorting by (partition, offset).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess, wait_until
from tests.kafka_ref.install import InstallError
from tests.kafka_ref.spark_kafka import install as install_connector

Row = tuple[Any, ...]
"""(partition, offset, key, value, topic, timestamp, timestampType, headers)."""

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 2


def _java_major() -> int | None:
    if shutil.which("java") is None:
        return None
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    found = re.search(r'version "(?:1\.)?(\d+)', done.stderr + done.stdout)
    return int(found.group(1)) if done.returncode == 0 and found else None


@pytest.fixture(scope="module")
def connector_jars() -> list[Path]:
    """The connector's jars; no Java 17+, no Maven or a failed resolution fails the tests."""
    major = _java_major()
    if major is None or major < 17:
        pytest.fail(f"Spark's Kafka connector needs Java 17+ on PATH, found {major or 'none'}",
                    pytrace=False)
    try:
        return install_connector()
    except InstallError as e:
        failure = e
    pytest.fail(f"Spark's Kafka connector could not be resolved (make kafka-ref): {failure}",
                pytrace=False)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    """One Ottla node for the module, its cleaner woken often for the compaction test."""
    ottla = OttlaProcess(str(tmp_path_factory.mktemp("spark-kafka") / "data"), overrides={
        "log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "200"}).start()
    try:
        yield ottla
    finally:
        ottla.stop()


@pytest.fixture(scope="module")
def spark(connector_jars, tmp_path_factory) -> Iterator[Any]:
    """A local[2] session with the connector on ``spark.jars`` and ``ottla`` registered.
    ``spark.jars`` only reaches the driver's class loader when PySpark starts its JVM, so
    a JVM started earlier in this process without them is a failure that says so."""
    from pyspark import SparkContext

    from ottla.spark.session import create_session

    session = create_session("ottla-spark-kafka-connector", "local[2]", {
        "spark.jars": ",".join(str(j) for j in connector_jars),
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.local.dir": str(tmp_path_factory.mktemp("spark-local")),
    })
    session.sparkContext.setLogLevel("ERROR")
    try:
        jvm = SparkContext._jvm
        assert jvm is not None
        try:
            jvm.java.lang.Class.forName(
                "org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
                jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
        except Exception as e:
            pytest.fail("Spark's Kafka connector is not on the driver's class path: was "
                        f"PySpark's JVM started before this module? {e}", pytrace=False)
        yield session
    finally:
        session.stop()


@pytest.fixture
def topic(request) -> str:
    name = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40]
    return f"{name}-{uuid.uuid4().hex[:6]}"


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS,
                 **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        future.result(30)


def records(prefix: str, n: int) -> Iterator[dict[str, Any]]:
    """Keys (some null), values (a tombstone, an empty one), timestamps and headers (none,
    several, a repeated name, a null value) of every shape a row can have."""
    base = int(time.time() * 1000) - 60_000
    for i in range(n):
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 1:
            headers = [("h", b"%d" % i), ("trace", prefix.encode())]
        elif i % 3 == 2:
            headers = [("h", b"a"), ("h", None)]
        value: bytes | None = (b"" if i % 17 == 3 else None if i % 13 == 5
                               else b"%s-value-%d-" % (prefix.encode(), i) * (1 + i % 4))
        yield {"partition": i % PARTITIONS, "key": None if i % 7 == 0 else b"k%d" % (i % 11),
               "value": value, "timestamp": base + i, "headers": headers}


def produce(bootstrap: str, topic: str, messages: Iterator[dict[str, Any]],
            producer: Producer | None = None, **config: Any) -> int:
    """Produce ``messages`` and wait for every acknowledgement; how many there were."""
    own = producer is None
    producer = producer or Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                     "enable.idempotence": True, **config})
    failures: list[Any] = []
    n = 0
    for m in messages:
        producer.produce(topic, **m, on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
        n += 1
    assert producer.flush(30) == 0
    assert not failures, failures
    if own:
        del producer
    return n


def read(spark: Any, fmt: str, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def as_rows(df: Any) -> list[Row]:
    """Collected rows as tuples, binaries as bytes, sorted by (partition, offset)."""
    def b(x: Any) -> bytes | None:
        return None if x is None else bytes(x)
    rows = [(r["partition"], r["offset"], b(r["key"]), b(r["value"]), r["topic"],
             r["timestamp"], r["timestampType"],
             tuple((h["key"], b(h["value"])) for h in r["headers"] or ()))
            for r in df.collect()]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def both(spark: Any, bootstrap: str, topic: str, **options: str) -> list[Row]:
    """Read ``topic`` with ``format("kafka")`` and ``format("ottla")``; assert the same
    schema and rows, and return the rows."""
    kafka = read(spark, "kafka", bootstrap, topic, **options)
    ottla = read(spark, "ottla", bootstrap, topic, **options)
    assert ottla.schema == kafka.schema
    kafka_rows, ottla_rows = as_rows(kafka), as_rows(ottla)
    assert len(ottla_rows) == len(kafka_rows)
    for k, o in zip(kafka_rows, ottla_rows, strict=True):
        assert o == k
    return kafka_rows


def consume_all(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> list[Any]:
    """Every record of ``topic`` (confluent-kafka, to the end of each partition)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: list[Any] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"not at the end of {topic} within 30 s"
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
            else:
                seen.append(msg)
    finally:
        consumer.close()
    return seen


def test_a_batch_read_of_every_codec_gives_the_same_rows(spark, node, topic) -> None:
    """One partition per codec, so that one pair of reads covers them all."""
    create_topic(node.bootstrap, topic, len(CODECS))
    written = {}
    for partition, codec in enumerate(CODECS):
        messages = [{**m, "partition": partition} for m in records(codec, 60)]
        produce(node.bootstrap, topic, iter(messages), **{"compression.type": codec})
        written[partition] = [m["value"] for m in messages]
    rows = both(spark, node.bootstrap, topic)
    for partition, codec in enumerate(CODECS):
        assert [r[3] for r in rows if r[0] == partition] == written[partition], codec
    assert {r[6] for r in rows} == {0}  # CreateTime
    assert any(r[7] == (("h", b"a"), ("h", None)) for r in rows)


def test_log_append_time_reads_the_same(spark, node, topic) -> None:
    create_topic(node.bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
    n = produce(node.bootstrap, topic, records("lat", 60), **{"compression.type": "zstd"})
    rows = both(spark, node.bootstrap, topic)
    assert len(rows) == n
    assert {r[6] for r in rows} == {1}


@pytest.fixture
def transactional_topic(node, topic) -> Iterator[str]:
    """2 partitions: committed, aborted, plain, committed, then a transaction left open
    (read_committed stops before it, read_uncommitted sees it); aborted at teardown."""
    create_topic(node.bootstrap, topic)

    def transaction(tid: str, prefix: str, n: int, commit: bool | None) -> Producer:
        producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": tid,
                             "linger.ms": 5, "transaction.timeout.ms": 600_000})
        producer.init_transactions(30)
        producer.begin_transaction()
        produce(node.bootstrap, topic, ({"partition": i % PARTITIONS, "value": b"%s%d" % (
            prefix.encode(), i)} for i in range(n)), producer=producer)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
        return producer

    transaction(f"{topic}-1", "c", 20, True)
    transaction(f"{topic}-2", "a", 10, False)
    produce(node.bootstrap, topic, ({"partition": i % PARTITIONS, "value": b"p%d" % i}
                                    for i in range(6)))
    transaction(f"{topic}-1", "d", 8, True)
    open_txn = transaction(f"{topic}-3", "o", 4, None)
    yield topic
    open_txn.abort_transaction(30)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_transactions_read_the_same_under_either_isolation_level(spark, node,
                                                                 transactional_topic,
                                                                 isolation) -> None:
    rows = both(spark, node.bootstrap, transactional_topic,
                **{"kafka.isolation.level": isolation})
    prefixes = {r[3][:1] for r in rows}
    if isolation == "read_committed":
        assert prefixes == {b"c", b"p", b"d"}
        assert len(rows) == 20 + 6 + 8
    else:
        assert prefixes == {b"c", b"a", b"p", b"d", b"o"}
        assert len(rows) == 20 + 10 + 6 + 8 + 4
    # Commit markers take offsets: in both formats the offsets have the same gaps.
    offsets = [r[1] for r in rows if r[0] == 0]
    assert offsets != list(range(len(offsets)))


def test_a_compacted_topic_after_cleaning_reads_the_same(spark, node, topic) -> None:
    create_topic(node.bootstrap, topic, 1, **{
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01"})
    keyed = [{"partition": 0, "key": b"k%d" % (i % 10), "value": b"v%d" % i + b"." * 40}
             for i in range(150)]
    # Unique keys after them push every keyed record out of the active segment.
    fillers = [{"partition": 0, "key": b"f%d" % i, "value": b"f" * 60} for i in range(30)]
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
    for m in keyed + fillers:  # one batch each: many small segments to clean
        producer.produce(topic, **m)
        assert producer.flush(10) == 0

    def cleaned() -> bool:
        keys = [m.key() for m in consume_all(node.bootstrap, topic, 1) if m.key()[:1] == b"k"]
        return len(keys) == 10
    wait_until(cleaned, 60, interval=0.5, message="the cleaner to keep one record per key")
    rows = both(spark, node.bootstrap, topic)
    latest = {m["key"]: m["value"] for m in keyed}
    assert {r[2]: r[3] for r in rows if r[2][:1] == b"k"} == latest
    assert len(rows) == 10 + 30
    assert rows[-1][1] == len(keyed) + len(fillers) - 1  # offsets keep their gaps


def test_per_partition_starting_and_ending_offsets_as_json(spark, node, topic) -> None:
    create_topic(node.bootstrap, topic)
    produce(node.bootstrap, topic, records("o", 100))
    starting = json.dumps({topic: {"0": 5, "1": -2}})
    ending = json.dumps({topic: {"0": 30, "1": -1}})
    rows = both(spark, node.bootstrap, topic, startingOffsets=starting, endingOffsets=ending)
    assert [r[1] for r in rows if r[0] == 0] == list(range(5, 30))
    assert [r[1] for r in rows if r[0] == 1] == list(range(0, 50))


def test_a_streaming_read_equals_the_batch_read(spark, node, topic, tmp_path) -> None:
    create_topic(node.bootstrap, topic)
    produce(node.bootstrap, topic, records("s", 200))
    name = f"memory_{uuid.uuid4().hex[:8]}"
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", node.bootstrap)
              .option("subscribe", topic).option("includeHeaders", "true")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "60")
              .load())
    query = (stream.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish"
        assert query.exception() is None, query.exception()
        assert len(query.recentProgress) >= 4  # 200 records, 60 a trigger
    finally:
        query.stop()
    streamed = as_rows(spark.sql(f"SELECT * FROM {name}"))
    assert streamed == both(spark, node.bootstrap, topic)
    assert len(streamed) == 200


def test_a_batch_write_reads_back_exactly(spark, node, topic) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    create_topic(node.bootstrap, topic)
    schema = StructType([
        StructField("key", BinaryType()), StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())])))])
    data = [(None if i % 9 == 0 else b"k%d" % i, b"value-%d" % i, i % PARTITIONS,
             [("n", b"%d" % i), ("tag", b"x")] if i % 2 else [])
            for i in range(150)]
    (spark.createDataFrame(data, schema).coalesce(1).write.format("kafka")
     .option("kafka.bootstrap.servers", node.bootstrap).option("topic", topic).save())
    messages = consume_all(node.bootstrap, topic)
    got = sorted(((m.partition(), m.offset()), (m.key(), m.value(), m.partition(),
                  [(k, v) for k, v in m.headers() or []])) for m in messages)
    assert [g[1] for g in got] == sorted(
        [(k, v, p, h) for k, v, p, h in data],
        key=lambda r: (r[2], int(r[1].split(b"-")[1])))
    # Spark's own read of what it wrote is Ottla's read too.
    assert len(both(spark, node.bootstrap, topic)) == 150
