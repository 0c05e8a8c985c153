"""One data directory, two systems: Apache Kafka 4.4 starts on what Ottla formatted and
wrote, and Ottla on what Kafka formatted and wrote, and each serves the other's records,
topic configs and committed offsets. This is the strongest check that Ottla's files are
Kafka's: ``meta.properties``, the bootstrap checkpoint with its voters (a ``--standalone``
dynamic quorum), the metadata log, the segments with their indexes and checkpoints, and
``__consumer_offsets``. The same server.properties serves both, one after the other."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.helpers import OttlaProcess, wait_until
from tests.kafka_ref.cluster import KafkaNode, run_tool
from tests.kafka_tools import require_kafka

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
TOPIC = "moved"
GROUP = "readers"
PER_ROUND = 400


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KafkaNode]:
    """A combined Kafka node's directory and server.properties (not started), with a
    ``--standalone`` quorum both systems can run."""
    require_kafka()
    node = KafkaNode(tmp_path / "node", share_classes=False)
    node.props.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{node.controller_port}",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    })
    node.write_config()
    try:
        yield node
    finally:
        node.stop(check=False)


def ottla_on(node: KafkaNode) -> OttlaProcess:
    """An Ottla process on the Kafka node's server.properties, ports and directory."""
    return OttlaProcess(str(node.data_dir), port=node.port,
                        controller_port=node.controller_port,
                        config_file=str(node.config_file))


def produce(bootstrap: str, start: int) -> None:
    """PER_ROUND keyed zstd records, values numbered from ``start``."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd",
                         "linger.ms": 5, "acks": "all"})
    for i in range(start, start + PER_ROUND):
        producer.produce(TOPIC, f"value-{i}".encode(), key=f"key-{i % 7}".encode())
    assert producer.flush(30) == 0


def read(bootstrap: str, group: str, count: int, commit: bool = False
         ) -> list[tuple[int, int, bytes, bytes]]:
    """``count`` records as ``group`` reads them from its committed offsets (or the
    start): (partition, offset, key, value); committed after with ``commit``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got: list[tuple[int, int, bytes, bytes]] = []

    def polled() -> bool:
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                got.append((message.partition(), message.offset(), message.key(),
                            message.value()))
        return len(got) >= count
    try:
        wait_until(polled, 60, 0, lambda: f"{count} records for {group} ({len(got)} read)")
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def committed(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(TOPIC, p) for p in range(2)], 30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in offsets}


def retention(bootstrap: str) -> str:
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the future is done
    described = admin.describe_configs([resource])[resource].result(30)
    return str(described["retention.ms"].value)


def test_kafka_runs_on_what_ottla_formatted_and_wrote_and_ottla_on_kafkas_writes(
        kafka: KafkaNode) -> None:
    subprocess.run([sys.executable, "-m", "ottla", "storage", "format", "-t", CLUSTER_ID,
                    "-c", str(kafka.config_file), "--standalone"], check=True,
                   capture_output=True, timeout=60)
    ottla = ottla_on(kafka)
    ottla.start()
    try:
        admin = AdminClient({"bootstrap.servers": ottla.bootstrap})  # held until done
        admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "123456789"})]
                            )[TOPIC].result(30)
        produce(ottla.bootstrap, 0)
        first = read(ottla.bootstrap, GROUP, PER_ROUND, commit=True)
        on_ottla = committed(ottla.bootstrap, GROUP)
    finally:
        ottla.stop()

    kafka.start()
    assert retention(kafka.bootstrap) == "123456789"
    assert committed(kafka.bootstrap, GROUP) == on_ottla
    produce(kafka.bootstrap, PER_ROUND)
    second = read(kafka.bootstrap, GROUP, PER_ROUND, commit=True)
    assert {value for *_, value in second} == {
        f"value-{i}".encode() for i in range(PER_ROUND, 2 * PER_ROUND)}
    on_kafka = committed(kafka.bootstrap, GROUP)
    kafka.stop()

    ottla = ottla_on(kafka)
    ottla.start()
    try:
        assert committed(ottla.bootstrap, GROUP) == on_kafka
        assert retention(ottla.bootstrap) == "123456789"
        everything = read(ottla.bootstrap, "everything", 2 * PER_ROUND)
    finally:
        ottla.stop()
    # Every record at the offset each system gave it, keys and values intact.
    assert sorted(everything) == sorted(first + second)


def test_ottla_runs_on_what_kafkas_storage_tool_formatted(kafka: KafkaNode) -> None:
    run_tool("kafka-storage", "format", "--cluster-id", CLUSTER_ID, "--config",
             str(kafka.config_file), "--standalone", check=True)
    ottla = ottla_on(kafka)
    ottla.start()
    try:
        admin = AdminClient({"bootstrap.servers": ottla.bootstrap})  # held until done
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        produce(ottla.bootstrap, 0)
        written = read(ottla.bootstrap, GROUP, PER_ROUND, commit=True)
    finally:
        ottla.stop()
    kafka.start()
    assert sorted(read(kafka.bootstrap, "everything", PER_ROUND)) == sorted(written)
    assert committed(kafka.bootstrap, GROUP) == {0: max(o for p, o, *_ in written if p == 0)
                                                 + 1, 1: max(o for p, o, *_ in written
                                                             if p == 1) + 1}


def features(bootstrap: str) -> str:
    """kafka-features describe, its epochs blanked (each log's own offsets)."""
    done = run_tool("kafka-features", "--bootstrap-server", bootstrap, "describe", check=True)
    return re.sub(r"Epoch: \d+", "Epoch: <n>", done.stdout)


@pytest.mark.parametrize("release", ["3.9-IV0", "4.1-IV0", "4.4-IV2"])
def test_a_node_formatted_at_a_release_has_the_features_kafkas_has(kafka: KafkaNode,
                                                                  release: str) -> None:
    """Formatted alike with --release-version (3.9-IV0, before group.version 1;
    4.1-IV0, the first with ELR on; 4.4-IV2, Kafka 4.4's newest), each system finalizes
    and supports the same levels, as Kafka's kafka-features prints them; but Kafka lists
    streams.version, which Ottla does not have (docs/compatibility.md, Features)."""
    run_tool("kafka-storage", "format", "--cluster-id", CLUSTER_ID, "--config",
             str(kafka.config_file), "--standalone", "--release-version", release, check=True)
    kafka.start()
    expected = features(kafka.bootstrap)
    kafka.stop()
    shutil.rmtree(kafka.data_dir)
    subprocess.run([sys.executable, "-m", "ottla", "storage", "format", "-t", CLUSTER_ID,
                    "-c", str(kafka.config_file), "--standalone", "--release-version",
                    release], check=True, capture_output=True, timeout=60)
    ottla = ottla_on(kafka)
    ottla.start()
    try:
        got = features(ottla.bootstrap)
    finally:
        ottla.stop()
    others = [line for line in expected.splitlines(keepends=True)
              if re.match(r"Feature: streams\.version\s", line)]
    assert len(others) == 1, expected
    assert re.search(rf"FinalizedVersionLevel: {release}\s", got), got
    assert got == "".join(line for line in expected.splitlines(keepends=True)
                          if line not in others)
