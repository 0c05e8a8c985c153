"""kafka.isolation.level: read_committed readers see committed transactions only and stop
at the last stable offset; read_uncommitted (the default, as in Spark) sees everything."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer

from tests.spark.kafka import create_topics, produce
from tests.spark.test_streaming import run_available_now


@contextmanager
def transaction(bootstrap: str, transactional_id: str) -> Iterator[Producer]:
    """A producer inside a begun transaction; the caller commits, aborts or leaves it."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5,
                         # A transaction left open across Spark queries outlives
                         # librdkafka's default 60 s timeout on a slow machine.
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    producer.begin_transaction()
    yield producer


def send(producer: Producer, topic: str, values: list[bytes]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(30) == 0


def committed(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with transaction(bootstrap, f"{topic}-c") as producer:
        send(producer, topic, values)
        producer.commit_transaction(30)


def aborted(bootstrap: str, topic: str, values: list[bytes]) -> None:
    with transaction(bootstrap, f"{topic}-a") as producer:
        send(producer, topic, values)
        producer.abort_transaction(30)


def names(prefix: str, n: int) -> list[bytes]:
    return [b"%s%d" % (prefix.encode(), i) for i in range(n)]


class OpenTransaction:
    """A transaction left open until the test commits it (aborted at teardown if not)."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.ended = False

    def commit(self) -> None:
        self.producer.commit_transaction(30)
        self.ended = True


@pytest.fixture
def mixed_topic(broker, topic) -> Iterator[tuple[str, OpenTransaction]]:
    """2 partitions: committed, aborted, committed, plain, aborted, then an open
    transaction and a committed one after it (hidden from read_committed by the open one).
    Yields the topic and the open transaction's producer."""
    create_topics(broker.bootstrap, [topic], 2)
    committed(broker.bootstrap, topic, names("c", 10))
    aborted(broker.bootstrap, topic, names("a", 6))
    committed(broker.bootstrap, topic, names("d", 5))
    produce(broker.bootstrap, ({"topic": topic, "partition": i % 2, "value": v}
                               for i, v in enumerate(names("p", 4))))
    aborted(broker.bootstrap, topic, names("b", 3))
    with transaction(broker.bootstrap, f"{topic}-open") as producer:
        send(producer, topic, names("o", 4))
        committed(broker.bootstrap, topic, names("late", 2))
        open_txn = OpenTransaction(producer)
        yield topic, open_txn
        if not open_txn.ended:
            producer.abort_transaction(30)


def batch_values(spark, broker, topic: str, **options: str) -> list[bytes]:
    r = spark.read.format("ottla").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("subscribe", topic)
    for key, value in options.items():
        r = r.option(key, value)
    return sorted(bytes(row["value"]) for row in r.load().select("value").collect())


BEFORE_OPEN = names("c", 10) + names("d", 5) + names("p", 4)
EVERYTHING = BEFORE_OPEN + names("a", 6) + names("b", 3) + names("o", 4) + names("late", 2)


def test_batch_read_committed_sees_committed_records_up_to_the_open_transaction(
        spark, broker, mixed_topic):
    topic, _open = mixed_topic
    assert batch_values(spark, broker, topic, **{"kafka.isolation.level": "read_committed"}) \
        == sorted(BEFORE_OPEN)
    # Split ranges end inside the log, among markers and aborted records, and still end.
    assert batch_values(spark, broker, topic, maxRecordsPerPartition="3",
                        **{"kafka.isolation.level": "read_committed"}) == sorted(BEFORE_OPEN)


def test_batch_read_uncommitted_is_the_default_and_sees_aborted_and_open_records(
        spark, broker, mixed_topic):
    topic, _open = mixed_topic
    assert batch_values(spark, broker, topic) == sorted(EVERYTHING)
    assert batch_values(spark, broker, topic,
                        **{"kafka.isolation.level": "read_uncommitted"}) == sorted(EVERYTHING)


def test_invalid_isolation_level_is_refused(spark, broker, topic):
    with pytest.raises(Exception, match="must be read_uncommitted or read_committed"):
        batch_values(spark, broker, topic, **{"kafka.isolation.level": "serializable"})


def test_stream_read_committed_waits_for_the_open_transaction(spark, broker, mixed_topic,
                                                              tmp_path):
    topic, open_txn = mixed_topic
    seen: list[bytes] = []

    def collect(batch, _batch_id):
        seen.extend(bytes(r["value"]) for r in batch.select("value").collect())

    def run(isolation: str, checkpoint: str) -> None:
        df = spark.readStream.format("ottla") \
            .option("kafka.bootstrap.servers", broker.bootstrap) \
            .option("subscribe", topic).option("startingOffsets", "earliest") \
            .option("maxOffsetsPerTrigger", "7") \
            .option("kafka.isolation.level", isolation).load()
        run_available_now(df.writeStream.foreachBatch(collect)
                          .option("checkpointLocation", str(tmp_path / checkpoint)))

    run("read_committed", "committed")
    assert sorted(seen) == sorted(BEFORE_OPEN)

    open_txn.commit()
    run("read_committed", "committed")
    assert sorted(seen) == sorted(BEFORE_OPEN + names("o", 4) + names("late", 2))

    seen.clear()
    run("read_uncommitted", "uncommitted")
    assert sorted(seen) == sorted(EVERYTHING)
