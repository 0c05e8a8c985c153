"""Whose defaults a new topic takes: a topic a broker auto-creates takes that broker's
``num.partitions`` and ``default.replication.factor`` (Kafka's AutoTopicCreationManager
sends them), while an AdminClient CreateTopics that leaves them at -1 takes the
controller's. The cluster: one controller with the defaults (1 and 1), three brokers
with 4 partitions, 3 replicas and ``min.insync.replicas=2``, so a topic made with the
controller's defaults could never take an ``acks=all`` write."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import KRaftCluster, wait_until

BROKER_DEFAULTS = {"num.partitions": "4", "default.replication.factor": "3",
                   "min.insync.replicas": "2", "auto.create.topics.enable": "true",
                   "transaction.state.log.replication.factor": "3",
                   "transaction.state.log.min.isr": "2"}
RECORDS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KRaftCluster]:
    c = KRaftCluster(str(tmp_path_factory.mktemp("defaults")), controllers=1, brokers=3,
                     broker_props=BROKER_DEFAULTS).start()
    try:
        yield c
    finally:
        c.stop()


def described(cluster: KRaftCluster, topic: str) -> tuple[int, set[int]]:
    """The topic's partition count and the replica counts of its partitions."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    return len(metadata.partitions), {len(p.replicas) for p in metadata.partitions.values()}


def produce_all(producer: Producer, topic: str, transactional: bool = False) -> list[str]:
    """Produce RECORDS records with acks=all (in one transaction if asked); the delivery
    errors (none when every record is in)."""
    errors: list[str] = []
    delivered: list[int] = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.offset())
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(topic, key=str(i).encode(), value=b"v", on_delivery=report)
    if transactional:
        producer.commit_transaction(60)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records still queued: {errors}"
    assert len(delivered) + len(errors) == RECORDS
    return errors


def test_a_producer_auto_creates_a_topic_with_the_brokers_defaults(cluster) -> None:
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 30000})
    assert produce_all(producer, topic) == []
    assert described(cluster, topic) == (4, {3})


def test_a_transactional_producer_auto_creates_with_the_brokers_defaults(cluster) -> None:
    topic = f"auto-txn-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "transactional.id": f"txn-{topic}", "message.timeout.ms": 30000,
                         "transaction.timeout.ms": 60000})
    assert produce_all(producer, topic, transactional=True) == []
    assert described(cluster, topic) == (4, {3})


def test_create_topics_without_counts_takes_the_controllers_defaults(cluster) -> None:
    topic = f"admin-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic)], operation_timeout=30)[topic].result(30)
    wait_until(lambda: described(cluster, topic) == (1, {1}), 30,
               message=lambda: f"{topic} described as {described(cluster, topic)}")
