"""Exactly-once micro-batch writes (sink option ``exactlyOnce=true``).

Spark replays a micro-batch whose end it did not record (a failed task, a killed
driver): a plain producer writes the replayed rows again. Here every write task is one
Kafka transaction, and the transaction also commits, as a consumer-group offset, the
micro-batch id it wrote. A replayed task first fences the producer of any earlier attempt
(``init_transactions`` aborts what it left open), then reads that id back, and writes
only if its micro-batch is not there yet.

Python's streaming writer is not told the batch id; Spark puts it, and the query id, in
the job's local properties (``streaming.sql.batchId``, ``sql.streaming.queryId``), which
reach the Python worker through ``TaskContext``. The query id is kept in the checkpoint,
so a restarted query uses the same transactional ids:
``<transactionalIdPrefix>-<queryId>-<task partition>``, also the consumer group that holds
the batch id (offset ``batchId + 1`` on partition 0 of the task's first output topic).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass
from itertools import chain
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark import TaskContext

from ottla.spark.options import OptionError, SinkOptions
from ottla.spark.producer_writer import BatchSender, first_topic, producer_config

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
DEFAULT_TRANSACTION_TIMEOUT_MS = "60000"
_CALL_TIMEOUT_S = 120.0
# Settings a consumer (only used to read the group's offset) shares with the producer:
# where the cluster is and how to connect; producer tuning would only draw warnings.
_CONNECTION_PREFIXES = ("bootstrap.servers", "client.", "security.", "ssl.", "sasl.",
                        "socket.", "broker.", "metadata.", "reconnect.", "api.version",
                        "topic.metadata.", "log", "debug")


@dataclass(frozen=True)
class WriteTask:
    """Which micro-batch of which query a write task writes, and as which partition."""

    query_id: str
    batch_id: int
    partition_id: int

    @classmethod
    def current(cls) -> WriteTask:
        context = TaskContext.get()
        batch = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        query = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        if context is None or batch is None or query is None:
            raise OptionError("exactlyOnce=true needs a micro-batch of a streaming query: "
                              "this task has no streaming batch id")
        return cls(query, int(batch), context.partitionId())

    def transactional_id(self, prefix: str) -> str:
        return f"{prefix}-{self.query_id}-{self.partition_id}"


@dataclass(frozen=True)
class TaskOutcome:
    records: int
    _: KW_ONLY
    already_written: bool  # an earlier attempt or run committed this batch of this task


def transactional_config(client: dict[str, str], transactional_id: str) -> dict[str, Any]:
    config = producer_config(client)
    config.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    config["transactional.id"] = transactional_id
    return config


def group_config(client: dict[str, str], group_id: str) -> dict[str, Any]:
    config: dict[str, Any] = {k: v for k, v in client.items()
                              if k.startswith(_CONNECTION_PREFIXES)}
    # read_committed makes librdkafka fetch offsets with require_stable: an offset that
    # a transaction is still committing is waited for rather than read as the old one.
    config.update({"group.id": group_id, "isolation.level": "read_committed",
                   "enable.auto.commit": False})
    return config


def write_exactly_once(batches: Iterator[pa.RecordBatch], options: SinkOptions,
                       task: WriteTask) -> TaskOutcome:
    """Write the task's rows in one transaction that also records ``task.batch_id``,
    unless a committed transaction of this task already recorded it (or a later one)."""
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return TaskOutcome(0, already_written=False)  # nothing to write, nothing to record
    # Deterministic on replay: the same rows come first to the same task.
    topic = first_topic(first, options.topic)
    assert topic is not None
    marker = TopicPartition(topic, 0)
    transactional_id = task.transactional_id(options.transactional_id_prefix)
    sender = BatchSender(transactional_config(options.client, transactional_id),
                         options.topic)
    producer = sender.producer
    group = Consumer(group_config(options.client, transactional_id))
    try:
        producer.init_transactions(_CALL_TIMEOUT_S)  # fences and aborts earlier attempts
        if last_written_batch(group, marker) >= task.batch_id:
            for _ in batches:  # a Python worker whose input is left unread is not reused
                pass
            return TaskOutcome(0, already_written=True)
        producer.begin_transaction()
        try:
            for batch in chain([first], batches):
                sender.send(batch)
            sent = sender.finish(_CALL_TIMEOUT_S)
            producer.send_offsets_to_transaction(
                [TopicPartition(marker.topic, marker.partition, task.batch_id + 1)],
                group.consumer_group_metadata(), _CALL_TIMEOUT_S)
            producer.commit_transaction(_CALL_TIMEOUT_S)
        except BaseException:
            _abort(producer)
            raise
        return TaskOutcome(sent, already_written=False)
    finally:
        group.close()


def last_written_batch(group: Consumer, marker: TopicPartition) -> int:
    """The batch id the task's last committed transaction recorded, -1 if none."""
    [committed] = group.committed([marker], timeout=_CALL_TIMEOUT_S)
    if committed.error is not None:
        raise KafkaException(committed.error)
    return committed.offset - 1 if committed.offset >= 0 else -1


def _abort(producer: Producer) -> None:
    """Abort after a failure; a fenced producer cannot, and its transaction is the
    newer attempt's to abort, so the original error is the one to report."""
    try:
        producer.abort_transaction(_CALL_TIMEOUT_S)
    except KafkaException:
        pass
