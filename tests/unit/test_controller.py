"""The QuorumController: admin operations produce records; replaying them changes state."""

from __future__ import annotations

import random
import uuid

import pytest

from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    BatchTooLarge,
    ControllerError,
    QuorumController,
)
from ottla.metadata import records as r
from ottla.metadata.image import ConfigResourceType, MetadataImage
from ottla.protocol.errors import ErrorCode


def controller(brokers: int = 1) -> QuorumController:
    c = QuorumController(1, default_num_partitions=2, rng=random.Random(7))
    for b in range(1, brokers + 1):
        apply(c, c.register_broker(b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None,
                                   b).records)
    return c


def apply(c: QuorumController, records: list) -> None:
    for rec in records:
        c.replay(r.decode(r.encode(rec)))  # also proves every record round-trips


def test_create_topic_writes_topic_config_and_partition_records() -> None:
    c = controller(3)
    result = c.create_topics([NewTopic("orders", 3, 2, configs={"retention.ms": "1000"})])
    kinds = [type(rec).__name__ for rec in result.records]
    assert kinds == ["TopicRecord", "ConfigRecord"] + ["PartitionRecord"] * 3
    apply(c, result.records)
    topic = c.image.topics_by_name["orders"]
    assert result.response[0].topic_id == topic.topic_id
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0]
               for p in topic.partitions.values())
    leaders = sorted(p.leader for p in topic.partitions.values())
    assert len(set(leaders)) == 3  # striped across the brokers
    assert c.image.topic_configs("orders") == {"retention.ms": "1000"}


@pytest.mark.parametrize("topic,code", [
    (NewTopic("bad name!"), ErrorCode.invalid_topic_exception),
    (NewTopic("x" * 250), ErrorCode.invalid_topic_exception),
    (NewTopic(".."), ErrorCode.invalid_topic_exception),
    (NewTopic("t", 0), ErrorCode.invalid_partitions),
    (NewTopic("t", 1, 0), ErrorCode.invalid_replication_factor),
    (NewTopic("t", 1, 2), ErrorCode.invalid_replication_factor),
    (NewTopic("t", configs={"no.such.config": "1"}), ErrorCode.invalid_config),
    (NewTopic("t", configs={"retention.ms": "soon"}), ErrorCode.invalid_config),
    (NewTopic("t", configs={"cleanup.policy": "shred"}), ErrorCode.invalid_config),
    (NewTopic("t", 1, assignments={0: [1]}), ErrorCode.invalid_request),
    (NewTopic("t", assignments={1: [1]}), ErrorCode.invalid_replica_assignment),
    (NewTopic("t", assignments={0: [7]}), ErrorCode.invalid_replica_assignment),
    (NewTopic("t", assignments={0: [1, 1]}), ErrorCode.invalid_replica_assignment),
])
def test_invalid_topics_are_rejected_with_kafka_error_codes(topic: NewTopic,
                                                            code: ErrorCode) -> None:
    result = controller().create_topics([topic])
    assert result.records == []
    assert result.response[0].error == code
    assert result.response[0].message


def test_existing_and_colliding_topics_and_validate_only() -> None:
    c = controller()
    apply(c, c.create_topics([NewTopic("a.b")]).records)
    results = c.create_topics([NewTopic("a.b"), NewTopic("a_b"), NewTopic("fresh")],
                              validate_only=True)
    assert [t.error for t in results.response] == [
        ErrorCode.topic_already_exists, ErrorCode.invalid_topic_exception, ErrorCode.none]
    assert results.records == []
    assert results.response[2].num_partitions == 2


def test_delete_topic_by_name_and_id() -> None:
    c = controller()
    apply(c, c.create_topics([NewTopic("a"), NewTopic("b")]).records)
    b_id = c.image.topics_by_name["b"].topic_id
    result = c.delete_topics(["a", None, "nope"], [None, b_id, None])
    assert [code for _, _, code, _ in result.response] == [
        ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    apply(c, result.records)
    assert c.image.topics_by_name == {}


def test_create_partitions_validates_counts() -> None:
    c = controller(2)
    apply(c, c.create_topics([NewTopic("a", 2, 2)]).records)
    result = c.create_partitions([("a", 5, None), ("a", 1, None), ("zz", 3, None)])
    assert [code for _, code, _ in result.response] == [
        ErrorCode.none, ErrorCode.invalid_partitions, ErrorCode.unknown_topic_or_partition]
    apply(c, result.records)
    assert sorted(c.image.topics_by_name["a"].partitions) == [0, 1, 2, 3, 4]


def test_incremental_alter_configs_set_delete_append_subtract() -> None:
    c = controller()
    apply(c, c.create_topics([NewTopic("a")]).records)
    t = ConfigResourceType.TOPIC
    ops = [("retention.ms", OP_SET, "5000"), ("cleanup.policy", OP_APPEND, "compact")]
    apply(c, c.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"retention.ms": "5000",
                                          "cleanup.policy": "delete,compact"}
    ops = [("retention.ms", OP_DELETE, None), ("cleanup.policy", OP_SUBTRACT, "delete")]
    apply(c, c.incremental_alter_configs([(t, "a", ops)]).records)
    assert c.image.topic_configs("a") == {"cleanup.policy": "compact"}
    bad = c.incremental_alter_configs([(t, "a", [("segment.bytes", OP_SET, "x")]),
                                       (t, "missing", [("retention.ms", OP_SET, "1")])])
    assert [code for _, _, code, _ in bad.response] == [
        ErrorCode.invalid_config, ErrorCode.unknown_topic_or_partition]


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    c = controller()
    apply(c, c.create_topics([NewTopic("a", configs={"retention.ms": "1"})]).records)
    apply(c, c.alter_configs([(ConfigResourceType.TOPIC, "a", {"segment.ms": "99999"})])
          .records)
    assert c.image.topic_configs("a") == {"segment.ms": "99999"}


def test_producer_id_blocks_do_not_overlap() -> None:
    c = controller()
    epoch = c.image.brokers[1].epoch
    first = c.allocate_producer_ids(1, epoch)
    apply(c, first.records)
    second = c.allocate_producer_ids(1, epoch)
    assert first.response == (0, 1000) and second.response == (1000, 1000)
    with pytest.raises(ControllerError) as stale:
        c.allocate_producer_ids(1, epoch + 1)
    assert stale.value.code == ErrorCode.stale_broker_epoch


def test_replay_from_records_rebuilds_the_same_image() -> None:
    c = QuorumController(1, rng=random.Random(3))
    written: list = []
    ops = [lambda: c.register_broker(1, uuid.uuid4(), [("PLAINTEXT", "h", 1, 0)], None, 0),
           lambda: c.register_broker(2, uuid.uuid4(), [("PLAINTEXT", "h", 2, 0)], None, 2),
           lambda: c.create_topics([NewTopic("x", 3, 2), NewTopic("y", 1, 1)]),
           lambda: c.create_partitions([("x", 4, None)]),
           lambda: c.delete_topics(["y"], [None])]
    for op in ops:
        result = op()
        apply(c, result.records)
        written += result.records
    image = MetadataImage()
    for rec in written:
        image.replay(r.decode(r.encode(rec)))
    assert sorted(image.topics_by_name) == ["x"]
    assert image.topics_by_name["x"].partitions == c.image.topics_by_name["x"].partitions
    assert sorted(image.brokers) == [1, 2]


def test_heartbeats_unfence_a_caught_up_broker_and_silence_fences_it() -> None:
    c = QuorumController(1, rng=random.Random(1))
    apply(c, c.register_broker(1, uuid.uuid4(), [("PLAINTEXT", "h", 9001, 0)], None, 1,
                               now_ms=0).records)
    result = c.register_broker(2, uuid.uuid4(), [("PLAINTEXT", "h", 9002, 0)], None, 10,
                               now_ms=0, unfence=False)
    apply(c, result.records)
    assert c.image.brokers[2].fenced
    behind = c.broker_heartbeat(2, 10, metadata_offset=5, want_fence=False,
                                want_shutdown=False, now_ms=100)
    assert behind.records == [] and behind.response.is_fenced
    caught_up = c.broker_heartbeat(2, 10, 10, False, False, now_ms=200)
    assert not caught_up.response.is_fenced
    apply(c, caught_up.records)
    apply(c, c.create_topics([NewTopic("t", assignments={0: [2], 1: [1]}),
                              NewTopic("u", assignments={0: [2, 1]})]).records)
    topic = c.image.topics_by_name["t"]

    def shared():  # a partition's registration is replaced, not changed, by a record
        return c.image.topics_by_name["u"].partitions[0]
    assert [topic.partitions[p].leader for p in (0, 1)] == [2, 1]
    assert shared().leader == 2 and shared().isr == [2, 1]

    with pytest.raises(ControllerError) as stale:
        c.broker_heartbeat(2, 9, 10, False, False, now_ms=300)
    assert stale.value.code == ErrorCode.stale_broker_epoch
    assert c.fence_stale_brokers(now_ms=5000, session_timeout_ms=9000).records == []
    silent = c.fence_stale_brokers(now_ms=9201, session_timeout_ms=9000,
                                   exempt=frozenset({1}))
    assert silent.response == [2]
    apply(c, silent.records)
    assert c.image.brokers[2].fenced
    assert topic.partitions[0].leader == -1  # its only replica is fenced
    assert topic.partitions[1].leader == 1
    assert shared().leader == 1 and shared().isr == [1]  # moved to the other ISR member

    back = c.broker_heartbeat(2, 10, 10, False, False, now_ms=9300)
    apply(c, back.records)
    assert not c.image.brokers[2].fenced and topic.partitions[0].leader == 2
    shutdown = c.broker_heartbeat(2, 10, 10, False, True, now_ms=9400)
    assert shutdown.response.should_shut_down and shutdown.response.is_fenced
    apply(c, shutdown.records)
    assert topic.partitions[0].leader == -1


def test_preferred_and_unclean_elections() -> None:
    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3):
        apply(c, c.register_broker(b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None,
                                   b).records)
    apply(c, c.create_topics([NewTopic("t", assignments={0: [1, 2], 1: [2, 3]})]).records)
    topic = c.image.topics_by_name["t"]
    # Move t-0's leadership away from its preferred replica, as a failover would.
    apply(c, [r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=2)])
    preferred = c.elect_leaders(0, [("t", 0), ("t", 1), ("t", 9), ("nope", 0)])
    assert preferred.response == {
        ("t", 0): (ErrorCode.none, None),
        ("t", 1): (ErrorCode.election_not_needed, "Leader election not needed for t-1"),
        ("t", 9): (ErrorCode.unknown_topic_or_partition, "t-9 does not exist"),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "nope-0 does not exist")}
    apply(c, preferred.records)
    assert topic.partitions[0].leader == 1
    assert c.elect_leaders(0, None).response == {}  # every leader is preferred already

    # t-1 loses its whole ISR: a clean election is impossible, an unclean one picks the
    # live replica outside the ISR.
    apply(c, [r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=-1,
                                      isr=(2,)),
              r.FenceBrokerRecord(id=2, epoch=2)])
    unclean = c.elect_leaders(1, [("t", 1)])
    assert unclean.response == {("t", 1): (ErrorCode.none, None)}
    apply(c, unclean.records)
    assert topic.partitions[1].leader == 3 and topic.partitions[1].isr == [3]
    apply(c, [r.FenceBrokerRecord(id=3, epoch=3),
              r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=-1)])
    stuck = c.elect_leaders(1, [("t", 1)]).response[("t", 1)]
    assert stuck[0] == ErrorCode.eligible_leaders_not_available


def test_alter_partition_validates_the_leaders_isr_change() -> None:
    from ottla.controller.quorum_controller import IsrChange

    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3):
        apply(c, c.register_broker(b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None,
                                   b * 10).records)
    apply(c, c.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]).records)
    topic = c.image.topics_by_name["t"]
    part = topic.partitions[0]
    assert (part.leader, part.isr, part.partition_epoch) == (1, [1, 2, 3], 0)

    def change(isr, leader_epoch=0, partition_epoch=0, lrs=0):
        return IsrChange(topic.topic_id, 0, leader_epoch, tuple(isr), lrs, partition_epoch)

    shrink = c.alter_partition(1, 10, [change([(1, 10), (2, 20)])])
    error, results = shrink.response
    assert error == ErrorCode.none
    assert results[(topic.topic_id, 0)].isr == [1, 2]
    assert results[(topic.topic_id, 0)].partition_epoch == 1
    apply(c, shrink.records)
    part = topic.partitions[0]
    assert (part.isr, part.partition_epoch, part.leader_epoch) == ([1, 2], 1, 0)

    def error_of(broker, epoch, ch):
        top, res = c.alter_partition(broker, epoch, [ch]).response
        return top if top != ErrorCode.none else res[(ch.topic_id, ch.partition)].error

    assert error_of(1, 9, change([(1, 10)], partition_epoch=1)) == ErrorCode.stale_broker_epoch
    assert error_of(1, 10, change([(1, 10)])) == ErrorCode.invalid_update_version
    assert error_of(1, 10, change([(1, 10)], leader_epoch=3, partition_epoch=1)) == \
        ErrorCode.fenced_leader_epoch
    assert error_of(2, 20, change([(1, 10), (2, 20)], partition_epoch=1)) == \
        ErrorCode.invalid_request  # only the leader may change the ISR
    assert error_of(1, 10, change([(2, 20)], partition_epoch=1)) == ErrorCode.invalid_request
    assert error_of(1, 10, change([(1, 10), (3, 99)], partition_epoch=1)) == \
        ErrorCode.ineligible_replica  # a stale incarnation of broker 3
    apply(c, [r.FenceBrokerRecord(id=3, epoch=30)])
    assert error_of(1, 10, change([(1, 10), (3, 30)], partition_epoch=1)) == \
        ErrorCode.ineligible_replica  # fenced
    gone = IsrChange(uuid.uuid4(), 0, 0, ((1, 10),), 0, 0)
    assert error_of(1, 10, gone) == ErrorCode.unknown_topic_id


def test_leaders_are_balanced_back_to_preferred_replicas() -> None:
    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2):
        apply(c, c.register_broker(b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None,
                                   b).records)
    apply(c, c.create_topics([NewTopic("t", assignments={0: [1, 2], 1: [2, 1]})]).records)
    topic = c.image.topics_by_name["t"]
    apply(c, [r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=2),
              r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=1,
                                      isr=(1,))])
    balanced = c.balance_partition_leaders()
    assert balanced.response == [("t", 0)]  # t-1's preferred replica left the ISR
    apply(c, balanced.records)
    assert [topic.partitions[p].leader for p in (0, 1)] == [1, 1]
    assert c.balance_partition_leaders().records == []


@pytest.mark.parametrize("validate_only", [False, True])
def test_an_operation_over_10000_records_is_refused_before_any_work(validate_only: bool
                                                                     ) -> None:
    """CreateTopics for 2^31-1 partitions is a 33-byte request: refused at once, for every
    topic of the request, as Kafka's MAX_RECORDS_PER_USER_OP does it."""
    c = controller(1)
    with pytest.raises(BatchTooLarge) as refused:
        c.create_topics([NewTopic("ok", 1), NewTopic("huge", 2**31 - 1)], validate_only)
    assert refused.value.code == ErrorCode.policy_violation
    assert refused.value.message == "Unable to perform excessively large batch operation."
    # Several topics that together pass the limit count as one operation too.
    with pytest.raises(BatchTooLarge):
        c.create_topics([NewTopic(f"t{i}", 4000) for i in range(3)], validate_only)
    fits = c.create_topics([NewTopic("t", 9999)], validate_only)
    assert fits.response[0].error == ErrorCode.none
    assert len(fits.records) == (0 if validate_only else 10000)


def test_create_partitions_over_the_limit_is_refused() -> None:
    c = controller(1)
    apply(c, c.create_topics([NewTopic("t", 1)]).records)
    with pytest.raises(BatchTooLarge):
        c.create_partitions([("t", 2**31 - 1, None)], validate_only=True)
    with pytest.raises(BatchTooLarge):
        c.create_partitions([("t", 10_002, None)])
    assert c.create_partitions([("t", 10_001, None)]).response == [("t", ErrorCode.none, None)]
