"""A failed log dir moves its leaderships (KIP-858, JBOD in KRaft), on a cluster of one
controller and three brokers, broker 101 with two log dirs: the dir holding the leader
replica of a partition disappears under it; the broker keeps running, reports the dir
offline in a heartbeat at once, and the controller elects another in-sync replica, while
an ``acks=all`` librdkafka producer keeps writing and sees no failure. Broker 101 stays
registered and unfenced, and keeps leading the partition in its other dir.

A broker whose every log dir has failed stops, as Kafka's halts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from ottla.protocol.api import ApiKey
from ottla.protocol.records import build_batch
from tests.helpers import KRaftCluster, OttlaProcess, WireClient, wait_until
from tests.integration.test_quorum import create

pytestmark = pytest.mark.slow

JBOD = 101
TOPIC = "jbod"
MOVE_BOUND_S = 20
"""How long the leadership may take to leave the failed dir: the failure shows at the next
segment roll (a few writes), the heartbeat goes at once."""


@pytest.fixture
def cluster(tmp_path) -> Iterator[KRaftCluster]:
    c = KRaftCluster(str(tmp_path), controllers=1, brokers=3,
                     broker_props={"broker.heartbeat.interval.ms": "500",
                                   "replica.lag.time.max.ms": "5000",
                                   "replica.fetch.backoff.ms": "200"})
    node = c.nodes[JBOD]
    second = node.data_dir + "-b"
    with open(node.config_file, encoding="utf-8") as f:
        props = f.read().replace(f"log.dirs={node.data_dir}\n",
                                 f"log.dirs={node.data_dir},{second}\n"
                                 f"metadata.log.dir={node.data_dir}\n")
    with open(node.config_file, "w", encoding="utf-8") as f:
        f.write(props)
    formatted = subprocess.run(
        [sys.executable, "-m", "ottla", "storage", "format", "--cluster-id", c.cluster_id,
         "--config", node.config_file, "--ignore-formatted"],
        capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 0, formatted.stderr
    assert os.path.exists(os.path.join(second, "meta.properties"))
    c.start()
    yield c
    c.stop()


def metadata(cluster: KRaftCluster, topics: list[str]) -> object:
    """Metadata as broker 102 answers it (it has the newest metadata the test needs: it
    learns of every change the controller commits)."""
    with WireClient(cluster.nodes[102].bootstrap, timeout=5) as client:
        return client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": t, "topic_id": None} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})


def partitions(cluster: KRaftCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR)."""
    (t,) = metadata(cluster, [topic]).topics  # type: ignore[attr-defined]
    return {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
            for p in t.partitions}


def brokers(cluster: KRaftCluster) -> set[int]:
    """The brokers Metadata lists (registered and unfenced)."""
    return {b.node_id for b in metadata(cluster, []).brokers}  # type: ignore[attr-defined]


def test_a_failed_log_dir_moves_its_leaderships_and_acks_all_writes_go_on(
        cluster: KRaftCluster) -> None:
    node = cluster.nodes[JBOD]
    first, second = node.data_dir, node.data_dir + "-b"
    create(cluster, [NewTopic(TOPIC, 2, replica_assignment=[[JBOD, 102, 103], [JBOD, 103, 102]],
                              config={"segment.bytes": "16384"})])
    wait_until(lambda: len(partitions(cluster, TOPIC)) == 2 and
               all(leader == JBOD and len(isr) == 3
                   for leader, _, isr in partitions(cluster, TOPIC).values()),
               30, 0.2, lambda: f"broker {JBOD} leading, three in sync: "
                                f"{partitions(cluster, TOPIC)}")
    placed = {p: d for p in (0, 1) for d in (first, second)
              if os.path.isdir(os.path.join(d, f"{TOPIC}-{p}"))}
    assert sorted(placed.values()) == [first, second], placed  # one partition in each dir
    failing = next(p for p, d in placed.items() if d == second)
    staying = 1 - failing

    delivered: dict[int, list[bytes]] = {0: [], 1: []}
    failed: list[str] = []

    def report(err, msg) -> None:
        if err is not None:
            failed.append(f"{msg.partition()}: {err}")
        else:
            delivered[msg.partition()].append(msg.value())

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                        "enable.idempotence": True, "linger.ms": 5,
                        "batch.size": 4096})  # below segment.bytes, which rolls often
    sent = 0

    def produce(count: int = 20) -> None:
        nonlocal sent
        for _ in range(count):
            for p in (failing, staying):
                producer.produce(TOPIC, value=b"%06d" % sent + b"." * 200, partition=p,
                                 on_delivery=report)
            sent += 1
        producer.poll(0)

    produce()
    assert producer.flush(30) == 0 and not failed

    shutil.rmtree(second)  # the disk is gone

    def moved() -> bool:
        produce()
        producer.poll(0.1)
        leader, _, isr = partitions(cluster, TOPIC)[failing]
        return leader in (102, 103) and JBOD not in isr

    wait_until(moved, MOVE_BOUND_S, 0.05,
               lambda: f"the leadership of {TOPIC}-{failing} to leave broker {JBOD}: "
                       f"{partitions(cluster, TOPIC)}")
    produce(50)
    assert producer.flush(60) == 0
    assert not failed, failed[:5]
    assert len(delivered[failing]) == len(delivered[staying]) == sent

    # Broker 101 is up, registered and unfenced, and still leads the partition in the dir
    # that did not fail, with every replica in sync.
    assert node.proc is not None and node.proc.poll() is None
    assert JBOD in brokers(cluster)
    leader, _, isr = partitions(cluster, TOPIC)[staying]
    assert leader == JBOD and sorted(isr) == [JBOD, 102, 103]
    assert f"Log directory {os.path.abspath(second)} is offline" in node.log()

    # Every acknowledged record of the moved partition is there, once, in order.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, failing, 0)])
    got: list[bytes] = []
    try:
        wait_until(lambda: got.extend(m.value() for m in consumer.consume(500, 0.5)
                                      if m.error() is None) or len(got) >= sent,
                   30, 0, "the moved partition read back")
    finally:
        consumer.close()
    assert got == delivered[failing]


def test_a_broker_whose_every_log_dir_failed_stops(tmp_path) -> None:
    meta, logs = str(tmp_path / "meta"), str(tmp_path / "logs")
    node = OttlaProcess(meta, overrides={"log.dirs": logs, "metadata.log.dir": meta}).start()
    try:
        with WireClient(node.bootstrap) as client:
            created = client.create_topic("t", configs={"segment.bytes": "1024"})
            assert created.topics[0].error_code == 0
            shutil.rmtree(logs)
            batch = build_batch([(None, b"x" * 600)], timestamp=int(time.time() * 1000))
            try:
                for _ in range(3):  # enough to need a new segment file
                    client.produce("t", 0, batch)
            except OSError:
                pass  # the node went while answering
        assert node.proc is not None
        wait_until(lambda: node.proc.poll() is not None, 30, 0.1, "the node to stop")
        assert node.proc.returncode == 2  # a fault, not a clean stop
        assert "have failed" in node.log()
    finally:
        node.stop(check=False)
