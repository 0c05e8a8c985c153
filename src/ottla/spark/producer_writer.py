"""Executor-side writing of Arrow batches as records, like Spark's Kafka sink.

Columns: ``value`` (required), ``key``, ``topic``, ``partition``, ``headers``; strings
are written as UTF-8, other columns are ignored and the ``topic`` option overrides the
``topic`` column, as in Spark. The producer is idempotent (no duplicates or reordering from its
own retries) and the task raises if any record is not acknowledged, so Spark retries
the task; like Spark's Kafka sink the guarantee is at least once across task retries.
Streaming writes with ``exactlyOnce=true`` go through :mod:`ottla.spark.exactly_once`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaException, Producer

from ottla.spark.options import OptionError, SinkOptions

KNOWN_COLUMNS = ("key", "value", "topic", "partition", "headers")
_FLUSH_TIMEOUT_S = 120.0


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


def write_batches(batches: Iterator[pa.RecordBatch], options: SinkOptions) -> int:
    """Produce every row; return the number acknowledged or raise the first failure."""
    producer = Producer(producer_config(options.client))
    errors: list[Any] = []
    acked = 0

    def delivered(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is not None:
            errors.append(err)
        else:
            acked += 1

    sent = 0
    for batch in batches:
        for row in rows(batch, options.topic):
            if errors:
                break
            produce_row(producer, row, delivered)
            sent += 1
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if errors:
        raise KafkaException(errors[0])
    if remaining or acked != sent:
        raise RuntimeError(f"{sent - acked} of {sent} records were not acknowledged within "
                           f"{_FLUSH_TIMEOUT_S:.0f} s")
    return acked


def produce_row(producer: Producer, row: dict[str, Any], callback: Any) -> None:
    kwargs = {k: v for k, v in row.items() if v is not None}
    while True:
        try:
            producer.produce(**kwargs, on_delivery=callback)
            return
        except BufferError:
            producer.poll(0.05)  # the local queue is full: wait for acknowledgements


def rows(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[dict[str, Any]]:
    columns = {name.lower(): batch.column(i).to_pylist()
               for i, name in enumerate(batch.schema.names) if name.lower() in KNOWN_COLUMNS}
    n = batch.num_rows
    none = [None] * n
    topics = columns.get("topic", none)
    keys = columns.get("key", none)
    partitions = columns.get("partition", none)
    headers = columns.get("headers", none)
    values = columns["value"]
    for i in range(n):
        topic = default_topic or topics[i]
        if not topic:
            raise OptionError(f"row {i} has a null topic and no 'topic' option is set")
        row = {"topic": topic, "value": values[i], "key": keys[i],
               "partition": partitions[i]}
        if headers[i]:
            row["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        yield row
