"""Executor-side reading of one offset range into Arrow record batches.

A task assigns its single partition to a confluent-kafka consumer (no group, nothing
committed), seeks to the range start and consumes until the range end. Records leave as
Arrow batches: Spark moves them to the JVM without a Python object per row.

Not every offset of a range arrives as a record: control records (transaction markers)
never do, nor, with ``read_committed``, aborted records. So the range ends when the
consumer's position (which librdkafka moves past markers and aborted batches) reaches
its end, or when ``enable.partition.eof`` reports the log ends at or past it (offsets
compacted away at the tail), not when the record at ``end - 1`` arrives.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from ottla.spark.arrow_records import HEADER_TYPE, arrow_schema
from ottla.spark.offset_reader import OffsetRange, data_loss

ROWS_PER_BATCH = 8192
_CONSUME_MAX = 10_000
# consume() returns when it has the number of messages asked for or after this wait; it
# is asked for what is left of the range, so the wait is paid only where offsets are gaps.
_CONSUME_WAIT_S = 0.1


def consumer_config(client: dict[str, str], fail_on_data_loss: bool,
                    isolation_level: str = "read_uncommitted") -> dict[str, Any]:
    config: dict[str, Any] = {
        "group.id": "ottla-spark",  # required by librdkafka; never joined or committed
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
        # Spark's (Java's) default; librdkafka's own default is read_committed.
        "isolation.level": isolation_level,
    }
    config.update(client)
    return config


def read_range(r: OffsetRange, client: dict[str, str], include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int,
               isolation_level: str = "read_uncommitted") -> Iterator[pa.RecordBatch]:
    """Every record in ``[r.from_offset, r.until_offset)`` that the isolation level
    shows, in offset order."""
    if r.size <= 0:
        return
    consumer = Consumer(consumer_config(client, fail_on_data_loss, isolation_level))
    try:
        yield from _consume(consumer, r, include_headers, fail_on_data_loss, poll_timeout_ms)
    finally:
        consumer.close()


def _consume(consumer: Consumer, r: OffsetRange, include_headers: bool,
             fail_on_data_loss: bool, poll_timeout_ms: int) -> Iterator[pa.RecordBatch]:
    tp = TopicPartition(r.topic, r.partition)
    start = r.from_offset
    if start >= 0:
        low, _high = consumer.get_watermark_offsets(tp, timeout=poll_timeout_ms / 1000)
        if start < low:
            if fail_on_data_loss:
                raise data_loss(f"Cannot fetch offset {start} of {r.topic}-{r.partition}: "
                                f"the earliest available offset is {low}")
            start = low
    if start >= r.until_offset:
        return
    consumer.assign([TopicPartition(r.topic, r.partition, start if start >= 0
                                    else OFFSET_BEGINNING)])
    schema = arrow_schema(include_headers)
    columns = _Columns(include_headers)
    deadline = time.monotonic() + poll_timeout_ms / 1000
    reached = start
    done = False
    while not done:
        left = r.until_offset - reached if reached >= 0 else _CONSUME_MAX
        messages = consumer.consume(min(max(left, 1), _CONSUME_MAX), timeout=_CONSUME_WAIT_S)
        for msg in messages:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= r.until_offset:
                        done = True  # the log ends at or past the range: nothing is missing
                    continue
                if err.code() == KafkaError._AUTO_OFFSET_RESET and fail_on_data_loss:
                    raise data_loss(f"Offset out of range for {r.topic}-{r.partition}: {err}")
                if err.retriable():
                    continue
                raise KafkaException(err)
            if msg.offset() >= r.until_offset:
                done = True
                break
            columns.add(msg)
        if not done:
            # Past markers and aborted records, the position is where the next record
            # would be: at the range end, every offset of the range has been seen.
            position = consumer.position([tp])[0].offset
            done = position >= r.until_offset
            if position > reached:
                reached, deadline = position, time.monotonic() + poll_timeout_ms / 1000
            elif not done and time.monotonic() > deadline:
                raise TimeoutError(
                    f"no records of {r.topic}-{r.partition} arrived for {poll_timeout_ms} "
                    f"ms while reading offsets {start} to {r.until_offset} (at {reached})")
        if len(columns) >= ROWS_PER_BATCH or (done and len(columns)):
            yield columns.take(schema)


class _Columns:
    """Accumulates message fields column by column for one Arrow batch."""

    def __init__(self, include_headers: bool) -> None:
        self.include_headers = include_headers
        self._reset()

    def _reset(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.topics: list[str] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.types: list[int] = []
        self.headers: list[list[dict[str, Any]] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msg: Any) -> None:
        self.keys.append(msg.key())
        self.values.append(msg.value())
        self.topics.append(msg.topic())
        self.partitions.append(msg.partition())
        self.offsets.append(msg.offset())
        ts_type, ts = msg.timestamp()
        self.timestamps.append(ts * 1000)
        # librdkafka numbers CreateTime 1 and LogAppendTime 2; Kafka (and Spark) 0 and 1.
        self.types.append(ts_type - 1 if ts_type > 0 else -1)
        if self.include_headers:
            headers = msg.headers()
            self.headers.append([{"key": k, "value": v} for k, v in headers]
                                if headers else [])

    def take(self, schema: pa.Schema) -> pa.RecordBatch:
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array(self.topics, pa.string()),
            pa.array(self.partitions, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADER_TYPE))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        self._reset()
        return batch
