"""Producing and inspecting test data with confluent-kafka, outside Spark."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

Record = tuple[str, int, int, bytes | None, bytes, tuple[tuple[str, bytes], ...]]


def create_topics(bootstrap: str, names: Iterable[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    for future in futures.values():
        future.result(30)


def produce(bootstrap: str, messages: Iterable[dict[str, Any]]) -> list[Record]:
    """Produce ``messages`` (produce() keyword arguments); the records as acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    acked: list[Record] = []
    failures: list[Any] = []

    def delivered(headers: tuple, err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err)
        else:  # delivery reports do not carry the headers: take them from the request
            acked.append((msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                          headers))

    for m in messages:
        headers = tuple(m.get("headers") or ())
        producer.produce(**m, on_delivery=functools.partial(delivered, headers))
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not failures, failures
    return acked


def rows_as_records(rows: Iterable[Any], headers: bool = True) -> list[Record]:
    return [(r["topic"], r["partition"], r["offset"],
             None if r["key"] is None else bytes(r["key"]), bytes(r["value"]),
             tuple((h["key"], bytes(h["value"])) for h in r["headers"]) if headers else ())
            for r in rows]
