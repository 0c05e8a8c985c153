"""What a new user's client sees on two first-day mistakes, as Kafka 4.x answers them:
keyless records sent to a compacted topic (also one made compacted by an
IncrementalAlterConfigs APPEND to ``cleanup.policy``), and offsets committed for a topic
that does not exist (by a consumer of either group protocol, and by an admin's
AlterConsumerGroupOffsets)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from ottla.protocol.errors import ErrorCode
from tests.batches import raw_batch, record
from tests.helpers import WireClient, wait_until

UNKNOWN = KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.fixture
def admin(ottla) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": ottla.bootstrap})
    for future in admin.create_topics([NewTopic("events", 2, 1)]).values():
        future.result(10)
    return admin


def change_cleanup_policy(admin: AdminClient, topic: str, op: AlterConfigOpType,
                          expected: str) -> None:
    """APPEND or SUBTRACT on the list-typed ``cleanup.policy``; back once described so."""
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=op)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)

    def policy() -> str:
        (described,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]
                                              ).values()
        return described.result(10)["cleanup.policy"].value

    wait_until(lambda: policy() == expected, 10)


def produce_batch(ottla, topic: str, keys: list[bytes | None]) -> list[KafkaError | None]:
    """One batch (a long linger) of records with ``keys``; each record's delivery error."""
    producer = Producer({"bootstrap.servers": ottla.bootstrap, "linger.ms": 500})
    # The topic's metadata first: records produced before it arrive wait in librdkafka's
    # unassigned queue and move to the partition one by one when it comes, and on a
    # loaded machine the linger has run out by then, so each went in a batch of its own.
    producer.list_topics(topic, timeout=10)
    errors: dict[int, KafkaError | None] = {}
    for i, key in enumerate(keys):
        producer.produce(topic, f"v{i}".encode(), key=key, partition=0,
                         on_delivery=lambda err, _msg, i=i: errors.__setitem__(i, err))
    assert producer.flush(30) == 0
    return [errors[i] for i in range(len(keys))]


def values_in(ottla, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        while (msg := consumer.poll(0.5)) is not None:  # nothing more than expected
            if not msg.error():
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_a_topic_made_compacted_refuses_keyless_records_naming_each(ottla, admin) -> None:
    assert produce_batch(ottla, "events", [None]) == [None]  # cleanup.policy=delete
    change_cleanup_policy(admin, "events", AlterConfigOpType.APPEND, "delete,compact")

    errors = produce_batch(ottla, "events", [b"a", None, b"c", None])
    # librdkafka reads the KIP-467 record errors: the keyless records fail INVALID_RECORD,
    # the others fail for being in their batch (Java's producer: "Failed to append record
    # because it was part of a batch which had one or more invalid records").
    assert [e.code() if e else None for e in errors] == [
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD]
    assert values_in(ottla, "events", 1) == [b"v0"]  # nothing of the refused batch

    now = int(time.time() * 1000)
    batch = raw_batch(record(key=None, delta=0) + record(key=b"k", delta=1) +
                      record(key=None, delta=2), 3, base_ts=now, max_ts=now)
    with WireClient(ottla.bootstrap) as client:
        answer = client.produce("events", 0, batch).responses[0].partition_responses[0]
    message = "Compacted topic cannot accept message without key in topic partition events-0"
    assert answer.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == \
        [(0, message), (2, message)]
    assert answer.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=0, "
        f"message='{message}'), RecordError(batchIndex=2, message='{message}')]")

    change_cleanup_policy(admin, "events", AlterConfigOpType.SUBTRACT, "delete")
    assert produce_batch(ottla, "events", [None, b"b"]) == [None, None]


def test_admin_alter_consumer_group_offsets_refuses_missing_topics(ottla, admin) -> None:
    def alter(group: str, *partitions: TopicPartition) -> list[tuple[str, int, Any]]:
        (future,) = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, list(partitions))]).values()
        return [(tp.topic, tp.partition, tp.error.code() if tp.error else None)
                for tp in future.result(10).topic_partitions]

    assert sorted(alter("ops", TopicPartition("events", 0, 7), TopicPartition("missing", 0, 3),
                        TopicPartition("events", 9, 1))) == [
        ("events", 0, None), ("events", 9, UNKNOWN), ("missing", 0, UNKNOWN)]
    (listed,) = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("ops")]).values()
    assert [(tp.topic, tp.partition, tp.offset)
            for tp in listed.result(10).topic_partitions] == [("events", 0, 7)]
    # Only missing topics: no group comes into being.
    assert alter("typo", TopicPartition("missing", 0, 3)) == [("missing", 0, UNKNOWN)]
    groups = admin.list_consumer_groups().result(10)
    assert "typo" not in {g.group_id for g in groups.valid}


def test_kafka_python_commit_to_a_missing_topic_fails(ottla, admin) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpPartition
    from kafka.errors import UnknownTopicOrPartitionError
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=ottla.bootstrap, group_id="kp",
                             enable_auto_commit=False)
    try:
        consumer.assign([KpPartition("events", 1)])
        assert consumer.committed(KpPartition("events", 1)) is None  # finds the coordinator
        outcome: list[Any] = []
        consumer.commit_async({KpPartition("missing", 0): OffsetAndMetadata(5, "", -1)},
                              callback=lambda _offsets, result: outcome.append(result))
        # kafka-python runs commit callbacks from poll. (Its commit() retries this error,
        # which it deems retriable, until its timeout.)
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and outcome, 15)
        assert isinstance(outcome[0], UnknownTopicOrPartitionError)
        consumer.commit({KpPartition("events", 1): OffsetAndMetadata(4, "", -1)})
        assert consumer.committed(KpPartition("events", 1)) == 4
        assert consumer.committed(KpPartition("missing", 0)) is None
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_member_cannot_commit_to_a_missing_topic(ottla, admin, protocol) -> None:
    consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": f"g-{protocol}",
                         "group.protocol": protocol, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["events"])
        wait_until(lambda: consumer.poll(0.1) is None and len(consumer.assignment()) == 2, 30)
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=[TopicPartition("events", 0, 2),
                                     TopicPartition("missing", 0, 9)], asynchronous=False)
        assert refused.value.args[0].code() == UNKNOWN
        committed = consumer.committed([TopicPartition("events", 0),
                                        TopicPartition("missing", 0)], timeout=10)
        assert [(tp.topic, tp.offset) for tp in committed] == \
            [("events", 2), ("missing", -1001)]
    finally:
        consumer.close()
