"""Executor-side writing of Arrow batches as records, like Spark's Kafka sink.

Columns: ``value`` (required), ``key``, ``topic``, ``partition``, ``headers``; strings
are written as UTF-8, other columns are ignored and the ``topic`` option overrides the
``topic`` column, as in Spark. The producer is idempotent (no duplicates or reordering from its
own retries) and the task raises if any record is not acknowledged, so Spark retries
the task; like Spark's Kafka sink the guarantee is at least once across task retries.
Streaming writes with ``exactlyOnce=true`` go through :mod:`ottla.spark.exactly_once`.

Speed: a batch's columns become Python lists once, and each record is one positional
``produce()`` call with no delivery callback of its own; librdkafka reports failures
only (``delivery.report.only.error``), so a record is acknowledged when ``flush()``
leaves nothing queued and no failure was reported. librdkafka batches the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from ottla.spark.options import OptionError, SinkOptions

KNOWN_COLUMNS = ("key", "value", "topic", "partition", "headers")
_FLUSH_TIMEOUT_S = 120.0
_ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses


def check_columns(names: Iterable[str], default_topic: str | None) -> None:
    """Fail on the driver, before any task runs, for a DataFrame the sink cannot write."""
    names = [n.lower() for n in names]
    if "value" not in names:
        raise OptionError("the DataFrame written to Ottla needs a 'value' column")
    if "topic" not in names and not default_topic:
        raise OptionError("no topic: set the 'topic' option or add a 'topic' column")


def producer_config(client: dict[str, str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "compression.type": "none",
    }
    config.update(client)
    return config


class BatchSender:
    """Produces the rows of Arrow batches through one confluent-kafka producer and
    collects the failures librdkafka reports."""

    def __init__(self, config: dict[str, Any], default_topic: str | None) -> None:
        self.failures: list[KafkaError] = []
        self.sent = 0
        self.default_topic = default_topic
        self.producer = Producer({**config, "delivery.report.only.error": True,
                                  "on_delivery": self._failed})

    def _failed(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failures.append(err)

    def send(self, batch: pa.RecordBatch) -> None:
        """Queue every row of ``batch``; raise the first failure reported so far."""
        self.producer.poll(0)
        self.raise_failure()
        n = batch.num_rows
        if n == 0:
            return
        columns = {name.lower(): batch.column(i)
                   for i, name in enumerate(batch.schema.names)
                   if name.lower() in KNOWN_COLUMNS}
        values = columns["value"].to_pylist()
        keys = columns["key"].to_pylist() if "key" in columns else repeat(None, n)
        partitions: Iterable[int] = (
            pc.fill_null(columns["partition"], _ANY_PARTITION).to_pylist()
            if "partition" in columns else repeat(_ANY_PARTITION, n))
        topics = self._topics(columns.get("topic"), n)
        headers = columns.get("headers")
        produce = self.producer.produce
        if headers is None or headers.null_count == n:
            for topic, value, key, partition in zip(topics, values, keys, partitions):
                while True:
                    try:
                        produce(topic, value, key, partition)
                        break
                    except BufferError:
                        self._wait_for_room()
        else:
            for topic, value, key, partition, pairs in zip(
                    topics, values, keys, partitions, headers.to_pylist()):
                extra = {"headers": [(h["key"], h["value"]) for h in pairs]} if pairs else {}
                while True:
                    try:
                        produce(topic, value, key, partition, **extra)
                        break
                    except BufferError:
                        self._wait_for_room()
        self.sent += n

    def _topics(self, column: pa.Array | None, n: int) -> Iterable[str]:
        if self.default_topic:
            return repeat(self.default_topic, n)
        assert column is not None  # check_columns refused the DataFrame on the driver
        topics = column.to_pylist()
        for bad in (None, ""):
            if bad in topics:
                raise OptionError(f"row {topics.index(bad)} has a null or empty topic and "
                                  "no 'topic' option is set")
        return topics

    def _wait_for_room(self) -> None:
        """The local queue is full: serve acknowledgements until a record fits."""
        self.producer.poll(0.05)
        self.raise_failure()

    def raise_failure(self) -> None:
        if self.failures:
            raise KafkaException(self.failures[0])

    def finish(self, timeout_s: float = _FLUSH_TIMEOUT_S) -> int:
        """Wait for every record; return how many were acknowledged or raise."""
        remaining = self.producer.flush(timeout_s)
        self.raise_failure()
        if remaining:
            raise RuntimeError(f"{remaining} of {self.sent} records were not acknowledged "
                               f"within {timeout_s:.0f} s")
        return self.sent


def first_topic(batch: pa.RecordBatch, default_topic: str | None) -> str | None:
    """The topic of the batch's first row (None for an empty batch)."""
    if batch.num_rows == 0:
        return None
    if default_topic:
        return default_topic
    names = [n.lower() for n in batch.schema.names]
    topic = batch.column(names.index("topic"))[0].as_py()
    if not topic:
        raise OptionError("row 0 has a null or empty topic and no 'topic' option is set")
    return topic


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """Produce every row; return the number acknowledged or raise the first failure."""
    sender = BatchSender(producer_config(options.client), options.topic)
    for batch in batches:
        sender.send(batch)
    return sender.finish()
