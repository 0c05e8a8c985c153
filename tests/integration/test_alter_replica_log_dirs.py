"""Moving a replica between a broker's log dirs (AlterReplicaLogDirs, JBOD) with Kafka's own
``kafka-reassign-partitions --reassignment-json-file`` and its ``log_dirs``, on a node with
two log dirs, while a producer keeps writing: the partition ends up in the other dir only
(DescribeLogDirs), with every record acknowledged readable once, and stays there across a
restart."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey
from tests.helpers import OttlaProcess, WireClient, wait_until
from tests.kafka_ref.cluster import run_tool

pytestmark = pytest.mark.slow

TOPIC = "moving"
MOVE_BOUND_S = 60
"""How long the copy and swap of a few MB may take on a loaded 2-core machine."""


@pytest.fixture
def node(tmp_path) -> Iterator[OttlaProcess]:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    n = OttlaProcess(first, overrides={"log.dirs": f"{first},{second}",
                                       "metadata.log.dir": first,
                                       "log.segment.bytes": str(256 * 1024),
                                       # The throttle's rate over 2 windows of 1 s, so
                                       # a first burst may pass it by one window only,
                                       # and copies of 64 KiB a step.
                                       "alter.log.dirs.replication.quota.window.num": "2",
                                       "replica.fetch.max.bytes": str(64 * 1024)}).start()
    yield n
    n.stop()


def partition_size(node: OttlaProcess) -> int:
    """The test's partition's size in bytes (DescribeLogDirs), not counting a future log."""
    with WireClient(node.bootstrap, timeout=10) as client:
        answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return sum(p.partition_size for r in answer.results for t in r.topics if t.name == TOPIC
               for p in t.partitions if not p.is_future_key)


def broker_configs(node: OttlaProcess) -> str:
    done = run_tool("kafka-configs", "--bootstrap-server", node.bootstrap, "--describe",
                    "--entity-type", "brokers", "--entity-name", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def log_dirs(node: OttlaProcess) -> dict[str, list[tuple[str, int, bool]]]:
    """DescribeLogDirs of the test's topic: log dir -> [(topic, partition, is_future_key)]."""
    with WireClient(node.bootstrap, timeout=10) as client:
        answer = client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {r.log_dir: [(t.name, p.partition_index, p.is_future_key)
                        for t in r.topics if t.name == TOPIC for p in t.partitions]
            for r in answer.results}


def test_a_replica_moves_to_the_other_log_dir_under_writes(node: OttlaProcess,
                                                            tmp_path) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    dirs = log_dirs(node)
    (source,) = [d for d, parts in dirs.items() if (TOPIC, 0, False) in parts]
    (destination,) = [d for d in dirs if d != source]

    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "batch.size": 64 * 1024})  # under the 256 KiB segments
    acked: list[bytes] = []
    failed: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append(msg.value())  # type: ignore[attr-defined]

    def produce(count: int, prefix: str) -> None:
        for i in range(count):
            producer.produce(TOPIC, f"{prefix}-{i}".encode() + b"x" * 1000,
                             on_delivery=delivered)
            producer.poll(0)
        producer.flush(30)

    produce(5000, "before")  # ~5 MB: many segments to copy
    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.is_set():
            producer.produce(TOPIC, f"during-{n}".encode(), on_delivery=delivered)
            producer.poll(0.002)
            n += 1
        producer.flush(30)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [destination]}]}))
        done = run_tool("kafka-reassign-partitions", "--bootstrap-server", node.bootstrap,
                        "--reassignment-json-file", str(plan), "--execute")
        assert done.returncode == 0, done.stdout + done.stderr
        wait_until(lambda: log_dirs(node)[destination] == [(TOPIC, 0, False)]
                   and log_dirs(node)[source] == [], MOVE_BOUND_S, 0.2,
                   "the partition in the destination log dir only")
        verify = run_tool("kafka-reassign-partitions", "--bootstrap-server", node.bootstrap,
                          "--reassignment-json-file", str(plan), "--verify")
        assert "is complete" in verify.stdout, verify.stdout + verify.stderr
    finally:
        stop.set()
        writer.join(60)
    produce(100, "after")
    assert not failed
    assert not [n for n in os.listdir(source) if n.startswith(TOPIC)]

    def read_all() -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "check",
                             "enable.auto.commit": False})
        consumer.assign([KafkaTopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        try:
            wait_until(lambda: got.extend(m.value() for m in consumer.consume(500, 1)
                                          if m.error() is None) or len(got) >= len(acked),
                       60, 0, "every acknowledged record read back")
        finally:
            consumer.close()
        return got

    assert sorted(read_all()) == sorted(acked)
    node.stop()
    node.start()
    assert log_dirs(node)[destination] == [(TOPIC, 0, False)]
    assert log_dirs(node)[source] == []
    assert sorted(read_all()) == sorted(acked)


def test_kafkas_replica_alter_log_dirs_throttle_holds_the_copy_to_its_rate(
        node: OttlaProcess, tmp_path) -> None:
    """kafka-reassign-partitions --replica-alter-log-dirs-throttle sets
    replica.alter.log.dirs.io.max.bytes.per.second on the broker; the copy then takes at
    least what its size over that rate says (less the one window the rate lets pass
    first, and one step of replica.fetch.max.bytes), and --verify clears the throttle
    once the move is complete."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    dirs = log_dirs(node)
    (source,) = [d for d, parts in dirs.items() if (TOPIC, 0, False) in parts]
    (destination,) = [d for d in dirs if d != source]
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all",
                         "linger.ms": 5, "compression.type": "none",
                         "batch.size": 64 * 1024})  # under the 256 KiB segments
    failed: list[str] = []
    for i in range(1000):
        producer.produce(TOPIC, f"{i}-".encode() + os.urandom(500).hex().encode(),
                         on_delivery=lambda err, _: failed.append(str(err)) if err else None)
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed
    size = partition_size(node)
    assert size > 1_000_000
    rate = 50_000

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [destination]}]}))
    started = time.monotonic()
    done = run_tool("kafka-reassign-partitions", "--bootstrap-server", node.bootstrap,
                    "--reassignment-json-file", str(plan), "--execute",
                    "--replica-alter-log-dirs-throttle", str(rate))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"The replica-alter-dir throttle limit was set to {rate} B/s" in done.stdout
    assert f"replica.alter.log.dirs.io.max.bytes.per.second={rate}" in broker_configs(node)
    wait_until(lambda: log_dirs(node)[destination] == [(TOPIC, 0, False)]
               and log_dirs(node)[source] == [], MOVE_BOUND_S, 0.2,
               "the partition in the destination log dir only")
    took = time.monotonic() - started
    # Unthrottled, the move is over as soon as the tool's JVM has sent it (a few s).
    allowance = rate + 64 * 1024  # one window's worth, and the step that crossed it
    assert took >= (size - allowance) / rate, (took, size)

    verify = run_tool("kafka-reassign-partitions", "--bootstrap-server", node.bootstrap,
                      "--reassignment-json-file", str(plan), "--verify")
    assert "is complete" in verify.stdout, verify.stdout + verify.stderr
    wait_until(lambda: "replica.alter.log.dirs.io.max.bytes.per.second"
               not in broker_configs(node), 30, 0.5, "the throttle cleared")
