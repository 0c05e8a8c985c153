"""group.version on a running node, changed by Kafka's kafka-features: at 0 a KIP-848
consumer (librdkafka's ``group.protocol=consumer``) is refused exactly as a Kafka 4.4 node
refuses it (its ConsumerGroupHeartbeat answered UNSUPPORTED_VERSION, which librdkafka makes
a fatal error), a classic consumer is not; back at 1 the KIP-848 consumer consumes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import wait_until
from tests.kafka_ref.cluster import run_tool
from tests.kafka_tools import require_kafka

REFUSED = ("Fatal error: Broker: API version not supported: ConsumerGroupHeartbeat fatal "
           "error: Broker: API version not supported")
"""What librdkafka 2.16 reports when a Kafka 4.4 node at group.version 0 refuses its
heartbeat (seen against Kafka 4.4 with this test's steps)."""


def poll_until(consumer: Consumer, done: Callable[[list[Any]], bool],
               timeout: float = 30.0) -> list[Any]:
    """Poll ``consumer`` until what it returned so far (messages and errors) is ``done``;
    each poll waits at most half a second."""
    seen: list[Any] = []

    def polled() -> bool:
        message = consumer.poll(0.5)
        if message is not None:
            seen.append(message.error() or message.value())
        return done(seen)
    wait_until(polled, timeout=timeout, interval=0,
               message=lambda: f"the consumer returned only {seen}")
    return seen


def consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "group.protocol": protocol, "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    return c


def kafka_features(bootstrap: str, *args: str) -> str:
    done = run_tool("kafka-features", "--bootstrap-server", bootstrap, *args, check=True)
    return done.stdout


def test_at_group_version_0_a_kip_848_consumer_is_refused_as_on_kafka(make_ottla) -> None:
    require_kafka()
    node = make_ottla()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("orders", 1, 1)])["orders"].result(30)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce("orders", b"first")
    assert producer.flush(30) == 0

    assert kafka_features(node.bootstrap, "downgrade", "--feature", "group.version=0") == \
        "group.version was downgraded to 0.\n"
    described = kafka_features(node.bootstrap, "describe")
    assert re.search(r"Feature: group\.version\s+SupportedMinVersion: 0\s+"
                     r"SupportedMaxVersion: 1\s+FinalizedVersionLevel: 0\s", described), \
        described

    refused = consumer(node.bootstrap, "kip-848", "consumer")
    try:
        (error,) = poll_until(refused, bool)
        assert isinstance(error, KafkaError)
        assert (error.code(), error.str()) == (KafkaError._FATAL, REFUSED)
    finally:
        refused.close()
    classic = consumer(node.bootstrap, "classic", "classic")
    try:
        assert poll_until(classic, bool) == [b"first"]
    finally:
        classic.close()

    assert kafka_features(node.bootstrap, "upgrade", "--feature", "group.version=1") == \
        "group.version was upgraded to 1.\n"
    served = consumer(node.bootstrap, "kip-848", "consumer")
    try:
        assert poll_until(served, bool) == [b"first"]
    finally:
        served.close()
