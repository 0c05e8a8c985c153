"""A combined Apache Kafka 4.4 node started from the Maven-installed jars: Kafka's own
kafka-topics creates a topic, confluent-kafka produces and consumes through it, and the
node stops cleanly. If this passes, Kafka can serve as the oracle next to Ottla."""

from __future__ import annotations

import re
import signal
import socket
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer

from tests.kafka_ref.cluster import KafkaCluster, run_tool, single_node

RECORDS = 100


def test_combined_node_serves_kafka_clients_and_stops_cleanly(kafka_node: KafkaCluster
                                                               ) -> None:
    bootstrap = kafka_node.bootstrap
    created = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--create",
                       "--topic", "smoke", "--partitions", "3", "--replication-factor", "1",
                       check=True)
    assert "Created topic smoke." in created.stdout
    described = run_tool("kafka-topics", "--bootstrap-server", bootstrap, "--describe",
                         "--topic", "smoke", check=True).stdout
    assert re.search(r"PartitionCount:\s*3\b", described), described

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    delivered: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    for i in range(RECORDS):
        producer.produce("smoke", key=str(i % 7).encode(), value=str(i).encode(),
                         on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    assert len(delivered) == RECORDS

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "smoke-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumed: dict[int, list[int]] = {}
    try:
        consumer.subscribe(["smoke"])
        deadline = time.monotonic() + 60
        while sum(map(len, consumed.values())) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            consumed.setdefault(message.partition(), []).append(int(message.value()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    values = [v for part in consumed.values() for v in part]
    assert sorted(values) == list(range(RECORDS))
    for part in consumed.values():  # one key, one partition: in order within it
        assert part == sorted(part)

    node = kafka_node.nodes[1]
    code = node.stop()  # checked: 0, or 143 after Kafka's shutdown hook ran on SIGTERM
    assert code in (0, 128 + signal.SIGTERM)
    assert "[BrokerServer id=1] shut down completed" in node.log(200_000)


def test_a_node_that_cannot_start_fails_the_start_at_once_with_its_log(kafka_libs,
                                                                         tmp_path) -> None:
    cluster = single_node(tmp_path / "kafka")
    node = cluster.nodes[1]
    with socket.socket() as taken:  # its broker port, taken by someone else
        taken.bind(("127.0.0.1", node.port))
        taken.listen()
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="is not running") as failure:
            cluster.start()
        assert time.monotonic() - started < 60  # the JVM's exit, not the 120 s bound
    assert "Address already in use" in str(failure.value)
    assert node.proc is None  # stopped (and reaped) by start's cleanup
