"""Kafka's BrokerTopicStats as the Produce and Fetch handlers count them
(``ottla.broker.topic_stats``): what each counter counts, per topic and for all topics,
with requests sent through the real handlers (the broker of test_broker_handlers)."""

from __future__ import annotations

from ottla.broker.topic_stats import BrokerTopicMetrics, BrokerTopicStats
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import build_batch
from tests.unit.test_broker_handlers import (  # noqa: F401 - the fixtures
    NOW_MS,
    OFFSETS_TOPIC,
    ask,
    batch,
    broker,
    coordinator,
    create_topic,
    fetch_body,
    fetched,
    leader_with_records,
    partition_answer,
    produce_body,
    replica_fetch_body,
)


def counts(metrics: BrokerTopicMetrics) -> dict[str, int]:
    return {name: getattr(metrics, name) for name in BrokerTopicMetrics.FIELDS}


def zero(**nonzero: int) -> dict[str, int]:
    return {**{name: 0 for name in BrokerTopicMetrics.FIELDS}, **nonzero}


async def test_nothing_is_counted_without_stats(broker) -> None:  # noqa: F811
    """A node without prometheus.listener counts nothing (``topic_stats`` is None)."""
    create_topic(broker, "orders")
    assert broker.topic_stats is None
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, batch(b"a"))))
    assert partition_answer(response).error_code == ErrorCode.none


async def test_produce_counts_records_and_bytes_appended(broker) -> None:  # noqa: F811
    stats = broker.topic_stats = BrokerTopicStats()
    create_topic(broker, "orders", partitions=2)
    create_topic(broker, "audit")
    first, second = batch(b"a", b"b", b"c"), batch(b"dddd")
    await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, first), (1, second)))
    await ask(broker, ApiKey.PRODUCE, 9, produce_body("audit", (0, batch(b"x"))))
    assert counts(stats.topics["orders"]) == zero(
        messages_in=4, bytes_in=len(first) + len(second), total_produce_requests=2)
    assert counts(stats.all_topics) == zero(
        messages_in=5, bytes_in=len(first) + len(second) + len(batch(b"x")),
        total_produce_requests=3)


async def test_produce_failures_count_as_kafka_counts_them(broker) -> None:  # noqa: F811
    """A record the topic refuses is a FailedProduceRequest; a corrupt batch, a partition
    led elsewhere or an internal topic is a produce request but no failure (Kafka's
    "known exceptions"); an unknown topic is neither."""
    stats = broker.topic_stats = BrokerTopicStats()
    create_topic(broker, "orders", configs={"cleanup.policy": "compact"})
    create_topic(broker, "elsewhere", leader=2)
    create_topic(broker, "__consumer_offsets")
    keyless = build_batch([(None, b"v")], timestamp=NOW_MS)
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, keyless)))
    assert partition_answer(response).error_code == ErrorCode.invalid_record
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, b"garbage")))
    assert partition_answer(response).error_code == ErrorCode.corrupt_message
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body("elsewhere", (0, batch(b"a"))))
    assert partition_answer(response).error_code == ErrorCode.not_leader_or_follower
    await ask(broker, ApiKey.PRODUCE, 9, produce_body("__consumer_offsets", (0, batch(b"a"))))
    response = await ask(broker, ApiKey.PRODUCE, 9, produce_body("nowhere", (0, batch(b"a"))))
    assert partition_answer(response).error_code == ErrorCode.unknown_topic_or_partition
    assert counts(stats.topics["orders"]) == zero(total_produce_requests=2,
                                                  failed_produce_requests=1)
    assert counts(stats.topics["elsewhere"]) == zero(total_produce_requests=1)
    assert counts(stats.topics["__consumer_offsets"]) == zero(total_produce_requests=1)
    assert "nowhere" not in stats.topics


async def test_fetch_counts_partition_reads_and_bytes_sent_to_consumers(broker) -> None:  # noqa: F811
    stats = broker.topic_stats = BrokerTopicStats()
    create_topic(broker, "orders", partitions=2)
    records = batch(b"a", b"b")
    await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, records)))
    response = await ask(broker, ApiKey.FETCH, 12, fetch_body(
        "orders", (0, 0, 1 << 20), (1, 0, 1 << 20), (7, 0, 1 << 20)))
    assert fetched(response)[7].error_code == ErrorCode.unknown_topic_or_partition
    orders = stats.topics["orders"]
    # Partition 7 does not exist: not counted, as Kafka answers it before reading.
    assert (orders.total_fetch_requests, orders.failed_fetch_requests) == (2, 0)
    assert orders.bytes_out == len(records)
    await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 99, 1 << 20)))
    assert (orders.total_fetch_requests, orders.failed_fetch_requests) == (3, 0)  # out of range


async def test_a_followers_fetch_is_a_fetch_request_but_not_bytes_out(broker) -> None:  # noqa: F811
    """A follower's fetch is replication: ReplicationBytesOut (of all topics, the only
    bean Kafka has it on) counts the records sent, BytesOut does not."""
    stats = broker.topic_stats = BrokerTopicStats()
    topic_id, _ = leader_with_records(broker, b"a", b"b")
    parts = fetched(await ask(broker, ApiKey.FETCH, 17, replica_fetch_body(
        topic_id, (0, 0, 0, -1))))
    assert parts[0].records
    assert counts(stats.topics["orders"]) == zero(total_fetch_requests=1)
    assert stats.replication_bytes_out == len(parts[0].records)
    assert stats.replication_bytes_in == 0


async def test_a_consumers_fetch_is_not_replication(broker) -> None:  # noqa: F811
    stats = broker.topic_stats = BrokerTopicStats()
    create_topic(broker, "orders")
    await ask(broker, ApiKey.PRODUCE, 9, produce_body("orders", (0, batch(b"a"))))
    await ask(broker, ApiKey.FETCH, 12, fetch_body("orders", (0, 0, 1 << 20)))
    assert stats.topics["orders"].bytes_out > 0
    assert (stats.replication_bytes_out, stats.replication_bytes_in) == (0, 0)


def test_a_removed_topic_stays_in_the_all_topics_figures() -> None:
    stats = BrokerTopicStats()
    stats.produced("gone", ErrorCode.none, 3, 300)
    stats.produced("kept", ErrorCode.none, 1, 100)
    stats.sent("gone", 50)
    stats.remove("gone")
    assert sorted(stats.topics) == ["kept"]
    assert counts(stats.all_topics) == zero(messages_in=4, bytes_in=400, bytes_out=50,
                                            total_produce_requests=2)


async def test_a_coordinators_appends_are_counted_as_produced(
        broker, coordinator) -> None:  # noqa: F811
    """Kafka's appendToLocalLog, through which every append of the leader goes whatever
    its origin (``ReplicaManager.appendRecords`` with AppendOrigin.COORDINATOR for the
    group coordinator's batches), marks TotalProduceRequests once per partition of the
    append, then MessagesIn and BytesIn: an offset commit's batch to
    ``__consumer_offsets`` counts one, its records and its bytes, of that topic and of
    all topics."""
    stats = broker.topic_stats = BrokerTopicStats()
    create_topic(broker, "orders", partitions=2)
    committed = await ask(broker, ApiKey.OFFSET_COMMIT, 9, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_metadata": None},
            {"partition_index": 1, "committed_offset": 7, "committed_metadata": None}]}]})
    assert [p.error_code for p in committed.topics[0].partitions] == [ErrorCode.none] * 2
    offsets_log = broker.replica_manager.partitions[(OFFSETS_TOPIC, 0)].log
    # One record per committed partition, in the batches the log now holds.
    assert counts(stats.topics[OFFSETS_TOPIC]) == zero(messages_in=2,
                                                       bytes_in=offsets_log.size,
                                                       total_produce_requests=1)
    assert counts(stats.all_topics) == counts(stats.topics[OFFSETS_TOPIC])
    assert "orders" not in stats.topics
