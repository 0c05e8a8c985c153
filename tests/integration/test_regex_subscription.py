"""A librdkafka consumer subscribed by regex with the KIP-848 protocol: the coordinator
reads ``SubscribedTopicRegex`` as Kafka does (RE2/J syntax, the whole topic name), and a
regex RE2/J refuses is INVALID_REGULAR_EXPRESSION."""

from __future__ import annotations

import time
from collections import Counter

from confluent_kafka import Consumer, KafkaError, Producer

from tests.helpers import WireClient

TOPICS = ["metrics-eu", "metrics-us", "old-metrics", "metrics-eu-2"]
PER_TOPIC = 10


def setup(node) -> None:
    with WireClient(node.bootstrap) as client:
        for name in TOPICS:
            assert client.create_topic(name, partitions=2).topics[0].error_code == 0
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for name in TOPICS:
        for i in range(PER_TOPIC):
            producer.produce(name, f"{name}-{i}".encode())
    assert producer.flush(10) == 0


def consumer(node, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                     "group.protocol": "consumer", "auto.offset.reset": "earliest"})


def test_regex_subscription_selects_whole_names_in_re2_syntax(make_ottla) -> None:
    node = make_ottla(**{"group.consumer.heartbeat.interval.ms": "500",
                         "group.consumer.assignment.interval.ms": "100"})
    setup(node)
    c = consumer(node, "by-regex")
    # A POSIX class: RE2 (and Kafka) read it as lower-case letters; Python's re would
    # read "[[:lower:]" then "]+", and select nothing.
    c.subscribe(["^metrics-[[:lower:]]+"])
    got: Counter[str] = Counter()
    try:
        deadline = time.monotonic() + 60
        while sum(got.values()) < 2 * PER_TOPIC and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got[msg.topic()] += 1
        # What the coordinator selected, as a state rather than a quiet spell: a
        # wrongly selected topic would be in the assignment.
        assigned = sorted((tp.topic, tp.partition) for tp in c.assignment())
    finally:
        c.close()
    assert got == {"metrics-eu": PER_TOPIC, "metrics-us": PER_TOPIC}
    assert assigned == [("metrics-eu", 0), ("metrics-eu", 1), ("metrics-us", 0),
                        ("metrics-us", 1)]


def test_a_regex_re2j_refuses_is_a_fatal_invalid_regular_expression(make_ottla) -> None:
    node = make_ottla()
    setup(node)
    c = consumer(node, "bad-regex")
    c.subscribe([r"^(m)\1etrics-eu"])  # a backreference: Python's re would take it
    try:
        deadline = time.monotonic() + 30
        error = None
        while error is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None:
                assert msg.error() is not None, f"consumed {msg.topic()} through a bad regex"
                error = msg.error()
        assert error is not None and error.code() == KafkaError._FATAL, error
        assert "The regular expression is not valid" in error.str()
    finally:
        c.close()
