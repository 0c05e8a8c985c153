"""Topics, partitions, leaders and ISRs (ReplicationControlManager): creating and deleting
topics, adding partitions, elections, AlterPartition and the per-operation record bound."""

from __future__ import annotations

import random
import uuid

import pytest

from ottla.common.topics import NewTopic
from ottla.controller.quorum_controller import QuorumController
from ottla.controller.results import BatchTooLarge
from ottla.metadata import records as r
from ottla.protocol.errors import ErrorCode
from tests.controllers import apply, controller


def test_create_topic_writes_topic_config_and_partition_records() -> None:
    c = controller(3)
    result = c.replication.create_topics(
        [NewTopic("orders", 3, 2, configs={"retention.ms": "1000"})])
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
    result = controller().replication.create_topics([topic])
    assert result.records == []
    assert result.response[0].error == code
    assert result.response[0].message


def test_existing_and_colliding_topics_and_validate_only() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a.b")]).records)
    results = c.replication.create_topics([NewTopic("a.b"), NewTopic("a_b"), NewTopic("fresh")],
                              validate_only=True)
    assert [t.error for t in results.response] == [
        ErrorCode.topic_already_exists, ErrorCode.invalid_topic_exception, ErrorCode.none]
    assert results.records == []
    assert results.response[2].num_partitions == 2


def test_delete_topic_by_name_and_id() -> None:
    c = controller()
    apply(c, c.replication.create_topics([NewTopic("a"), NewTopic("b")]).records)
    b_id = c.image.topics_by_name["b"].topic_id
    result = c.replication.delete_topics(["a", None, "nope"], [None, b_id, None])
    assert [code for _, _, code, _ in result.response] == [
        ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    apply(c, result.records)
    assert c.image.topics_by_name == {}


def test_create_partitions_validates_counts() -> None:
    c = controller(2)
    apply(c, c.replication.create_topics([NewTopic("a", 2, 2)]).records)
    result = c.replication.create_partitions([("a", 5, None), ("a", 1, None), ("zz", 3, None)])
    assert [code for _, code, _ in result.response] == [
        ErrorCode.none, ErrorCode.invalid_partitions, ErrorCode.unknown_topic_or_partition]
    apply(c, result.records)
    assert sorted(c.image.topics_by_name["a"].partitions) == [0, 1, 2, 3, 4]


def test_preferred_and_unclean_elections() -> None:
    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b).records)
    apply(c, c.replication.create_topics(
        [NewTopic("t", assignments={0: [1, 2], 1: [2, 3]})]).records)
    topic = c.image.topics_by_name["t"]
    # Move t-0's leadership away from its preferred replica, as a failover would.
    apply(c, [r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=2)])
    preferred = c.replication.elect_leaders(0, [("t", 0), ("t", 1), ("t", 9), ("nope", 0)])
    assert preferred.response == {
        ("t", 0): (ErrorCode.none, None),
        ("t", 1): (ErrorCode.election_not_needed, "Leader election not needed for t-1"),
        ("t", 9): (ErrorCode.unknown_topic_or_partition, "t-9 does not exist"),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "nope-0 does not exist")}
    apply(c, preferred.records)
    assert topic.partitions[0].leader == 1
    assert c.replication.elect_leaders(0, None).response == {}  # every leader is preferred already

    # t-1 loses its whole ISR: a clean election is impossible, an unclean one picks the
    # live replica outside the ISR.
    apply(c, [r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=-1,
                                      isr=(2,)),
              r.FenceBrokerRecord(id=2, epoch=2)])
    unclean = c.replication.elect_leaders(1, [("t", 1)])
    assert unclean.response == {("t", 1): (ErrorCode.none, None)}
    apply(c, unclean.records)
    assert topic.partitions[1].leader == 3 and topic.partitions[1].isr == [3]
    apply(c, [r.FenceBrokerRecord(id=3, epoch=3),
              r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=-1)])
    stuck = c.replication.elect_leaders(1, [("t", 1)]).response[("t", 1)]
    assert stuck[0] == ErrorCode.eligible_leaders_not_available


def test_alter_partition_validates_the_leaders_isr_change() -> None:
    from ottla.metadata.isr_change import IsrChange

    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b * 10).records)
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]).records)
    topic = c.image.topics_by_name["t"]
    part = topic.partitions[0]
    assert (part.leader, part.isr, part.partition_epoch) == (1, [1, 2, 3], 0)

    def change(isr, leader_epoch=0, partition_epoch=0, lrs=0):
        return IsrChange(topic.topic_id, 0, leader_epoch, tuple(isr), lrs, partition_epoch)

    shrink = c.replication.alter_partition(1, 10, [change([(1, 10), (2, 20)])])
    error, results = shrink.response
    assert error == ErrorCode.none
    assert results[(topic.topic_id, 0)].isr == [1, 2]
    assert results[(topic.topic_id, 0)].partition_epoch == 1
    apply(c, shrink.records)
    part = topic.partitions[0]
    assert (part.isr, part.partition_epoch, part.leader_epoch) == ([1, 2], 1, 0)

    def error_of(broker, epoch, ch):
        top, res = c.replication.alter_partition(broker, epoch, [ch]).response
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
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b).records)
    apply(c, c.replication.create_topics(
        [NewTopic("t", assignments={0: [1, 2], 1: [2, 1]})]).records)
    topic = c.image.topics_by_name["t"]
    apply(c, [r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, leader=2),
              r.PartitionChangeRecord(partition_id=1, topic_id=topic.topic_id, leader=1,
                                      isr=(1,))])
    balanced = c.replication.balance_partition_leaders()
    assert balanced.response == [("t", 0)]  # t-1's preferred replica left the ISR
    apply(c, balanced.records)
    assert [topic.partitions[p].leader for p in (0, 1)] == [1, 1]
    assert c.replication.balance_partition_leaders().records == []


@pytest.mark.parametrize("validate_only", [False, True])
def test_an_operation_over_10000_records_is_refused_before_any_work(validate_only: bool
                                                                     ) -> None:
    """CreateTopics for 2^31-1 partitions is a 33-byte request: refused at once, for every
    topic of the request, as Kafka's MAX_RECORDS_PER_USER_OP does it."""
    c = controller(1)
    with pytest.raises(BatchTooLarge) as refused:
        c.replication.create_topics([NewTopic("ok", 1), NewTopic("huge", 2**31 - 1)], validate_only)
    assert refused.value.code == ErrorCode.policy_violation
    assert refused.value.message == "Excessively large number of partitions per request."
    # Several topics that together pass the limit count as one operation too.
    with pytest.raises(BatchTooLarge):
        c.replication.create_topics([NewTopic(f"t{i}", 4000) for i in range(3)], validate_only)
    fits = c.replication.create_topics([NewTopic("t", 9999)], validate_only)
    assert fits.response[0].error == ErrorCode.none
    assert len(fits.records) == (0 if validate_only else 10000)


def test_create_partitions_over_the_limit_is_refused() -> None:
    c = controller(1)
    apply(c, c.replication.create_topics([NewTopic("t", 1)]).records)
    with pytest.raises(BatchTooLarge):
        c.replication.create_partitions([("t", 2**31 - 1, None)], validate_only=True)
    with pytest.raises(BatchTooLarge):
        c.replication.create_partitions([("t", 10_002, None)])
    assert c.replication.create_partitions([("t", 10_001, None)]).response == \
        [("t", ErrorCode.none, None)]


def three_brokers_one_isr(unclean: str | None) -> tuple[QuorumController, uuid.UUID]:
    """t-0 on brokers 1, 2, 3 whose ISR is down to broker 1; ``unclean`` sets the topic's
    unclean.leader.election.enable."""
    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b).records)
    configs = {} if unclean is None else {"unclean.leader.election.enable": unclean}
    apply(c, c.replication.create_topics(
        [NewTopic("t", assignments={0: [1, 2, 3]}, configs=configs)]).records)
    topic = c.image.topics_by_name["t"]
    apply(c, [r.PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=(1,))])
    return c, topic.topic_id


def test_losing_the_last_in_sync_replica_leaves_no_leader_without_unclean_election() -> None:
    c, _ = three_brokers_one_isr(None)
    apply(c, c.cluster.fence_stale_brokers(10**6, 1000, exempt=frozenset({2, 3})).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr) == (-1, [1])


def test_unclean_election_enabled_on_the_topic_elects_a_live_replica_to_recover() -> None:
    """KIP-704: the unclean leader starts RECOVERING, alone in the ISR."""
    c, _ = three_brokers_one_isr("true")
    apply(c, c.cluster.fence_stale_brokers(10**6, 1000, exempt=frozenset({2, 3})).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.leader_recovery_state) == (2, [2], 1)
    assert part.leader_epoch == 1


def test_the_cluster_default_enables_unclean_election_and_the_topic_can_refuse_it() -> None:
    c, _ = three_brokers_one_isr(None)
    apply(c, [r.ConfigRecord(resource_type=4, resource_name="",
                             name="unclean.leader.election.enable", value="true")])
    assert c.replication.unclean_allowed("t")
    refusing, _ = three_brokers_one_isr("false")
    apply(refusing, [r.ConfigRecord(resource_type=4, resource_name="",
                                    name="unclean.leader.election.enable", value="true")])
    assert not refusing.replication.unclean_allowed("t")


def test_a_replica_returning_to_a_leaderless_partition_leads_it_only_if_unclean_is_allowed(
        ) -> None:
    for unclean, expected in (("false", -1), ("true", 2)):
        c, _ = three_brokers_one_isr(unclean)
        apply(c, c.cluster.fence_stale_brokers(10**6, 1000).records)  # all: no leader
        assert c.image.topics_by_name["t"].partitions[0].leader == -1
        epoch = c.image.brokers[2].epoch
        apply(c, c.cluster.broker_heartbeat(2, epoch, 10**9, False, False, 10**6 + 1).records)
        assert c.image.topics_by_name["t"].partitions[0].leader == expected, unclean


def four_brokers_and_a_topic() -> tuple[QuorumController, uuid.UUID]:
    c = QuorumController(1, rng=random.Random(1))
    for b in (1, 2, 3, 4):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b * 10).records)
    apply(c, c.replication.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]).records)
    return c, c.image.topics_by_name["t"].topic_id


def test_a_reassignment_adds_replicas_then_completes_when_they_are_in_sync() -> None:
    from ottla.metadata.isr_change import IsrChange

    c, topic_id = four_brokers_and_a_topic()
    started = c.replication.alter_partition_reassignments([("t", 0, [2, 3, 4])])
    assert started.response == {("t", 0): (ErrorCode.none, None)}
    apply(c, started.records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.replicas, part.adding_replicas, part.removing_replicas, part.leader) == \
        ([2, 3, 4, 1], [4], [1], 1)
    assert c.replication.list_partition_reassignments(None).response == \
        {("t", 0): ([2, 3, 4, 1], [4], [1])}
    # The leader reports broker 4 caught up: the move completes in the same change.
    done = c.replication.alter_partition(1, 10, [IsrChange(
        topic_id, 0, 0, ((1, 10), (2, 20), (3, 30), (4, 40)), 0, part.partition_epoch)])
    result = done.response[1][(topic_id, 0)]
    assert (result.leader, result.isr) == (2, [2, 3, 4])
    apply(c, done.records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.replicas, part.isr, part.adding_replicas, part.removing_replicas) == \
        ([2, 3, 4], [2, 3, 4], [], [])
    assert (part.leader, part.leader_epoch) == (2, 1)
    assert c.replication.list_partition_reassignments(None).response == {}


def test_a_reassignment_can_be_cancelled_back_to_the_original_replicas() -> None:
    c, _ = four_brokers_and_a_topic()
    apply(c, c.replication.alter_partition_reassignments([("t", 0, [2, 3, 4])]).records)
    cancel = c.replication.alter_partition_reassignments([("t", 0, None)])
    assert cancel.response == {("t", 0): (ErrorCode.none, None)}
    apply(c, cancel.records)
    part = c.image.topics_by_name["t"].partitions[0]
    # The replicas before the move, in the order the move's list has them (Kafka's
    # PartitionReassignmentRevert: the replicas minus those being added).
    assert (part.replicas, part.adding_replicas, part.removing_replicas, part.leader) == \
        ([2, 3, 1], [], [], 1)
    again = c.replication.alter_partition_reassignments([("t", 0, None)]).response
    assert again[("t", 0)][0] == ErrorCode.no_reassignment_in_progress


def test_a_reassignment_that_only_removes_or_reorders_completes_at_once() -> None:
    c, _ = four_brokers_and_a_topic()
    apply(c, c.replication.alter_partition_reassignments([("t", 0, [3, 2])]).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.replicas, part.isr, part.adding_replicas, part.leader) == \
        ([3, 2], [2, 3], [], 3)


def test_bad_reassignments_get_kafka_errors() -> None:
    c, _ = four_brokers_and_a_topic()
    result = c.replication.alter_partition_reassignments([
        ("nope", 0, [1]), ("t", 7, [1]), ("t", 0, [1, 1]), ("t", 0, []),
        ("t", 0, [1, 2, 9])]).response
    assert [code for code, _ in result.values()] == [
        ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_replica_assignment]
    codes = [c.replication.alter_partition_reassignments([("t", 0, t)]).response[("t", 0)][0]
             for t in ([1, 1], [], [1, 2, 9])]
    assert codes == [ErrorCode.invalid_replica_assignment] * 3
    fixed_rf = c.replication.alter_partition_reassignments([("t", 0, [1, 2])],
                                                           allow_replication_factor_change=False)
    assert fixed_rf.response[("t", 0)][0] == ErrorCode.invalid_replication_factor


def elr_cluster(enabled: bool) -> QuorumController:
    """Brokers 1, 2, 3; t-0 on all three with min.insync.replicas=2; ELR on or off."""
    c = QuorumController(1, rng=random.Random(1))
    if enabled:
        apply(c, [r.FeatureLevelRecord(name="eligible.leader.replicas.version",
                                       feature_level=1)])
    for b in (1, 2, 3):
        apply(c, c.cluster.register_broker(
            b, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + b, 0)], None, b).records)
    apply(c, c.replication.create_topics([NewTopic(
        "t", assignments={0: [1, 2, 3]}, configs={"min.insync.replicas": "2"})]).records)
    return c


def fence(c: QuorumController, *brokers: int) -> None:
    for b in brokers:
        apply(c, c.cluster.fence_stale_brokers(
            10**6, 1000, exempt=frozenset({1, 2, 3} - {b})).records)


def test_replicas_leaving_an_isr_below_min_isr_stay_eligible_and_one_leads_again() -> None:
    """KIP-966: the ISR may empty; those that left it below min.insync.replicas are the
    ELR, and the first of them back leads (no unclean election needed)."""
    c = elr_cluster(True)
    fence(c, 3)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.isr, part.elr) == ([1, 2], [])  # still at min.insync.replicas
    fence(c, 2)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr) == (1, [1], [2])
    fence(c, 1)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, sorted(part.elr)) == (-1, [], [1, 2])
    epoch = c.image.brokers[2].epoch
    apply(c, c.cluster.broker_heartbeat(2, epoch, 10**9, False, False, 10**6 + 1).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr, part.leader_recovery_state) == (2, [2], [1], 0)


def test_without_elr_the_last_isr_member_stays_and_nobody_else_may_lead() -> None:
    c = elr_cluster(False)
    fence(c, 3)
    fence(c, 2)
    fence(c, 1)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr) == (-1, [1], [])
    epoch = c.image.brokers[2].epoch
    apply(c, c.cluster.broker_heartbeat(2, epoch, 10**9, False, False, 10**6 + 1).records)
    assert c.image.topics_by_name["t"].partitions[0].leader == -1


def test_an_isr_back_at_min_isr_clears_the_elr() -> None:
    from ottla.metadata.isr_change import IsrChange

    c = elr_cluster(True)
    fence(c, 3)
    fence(c, 2)
    part = c.image.topics_by_name["t"].partitions[0]
    assert part.elr == [2]
    for b in (2, 3):
        epoch = c.image.brokers[b].epoch
        apply(c, c.cluster.broker_heartbeat(b, epoch, 10**9, False, False, 10**6).records)
    grown = c.replication.alter_partition(1, c.image.brokers[1].epoch, [IsrChange(
        c.image.topics_by_name["t"].topic_id, 0, part.leader_epoch, ((1, -1), (2, -1)), 0,
        part.partition_epoch)])
    apply(c, grown.records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.isr, part.elr, part.last_known_elr) == ([1, 2], [], [])


def restart(c: QuorumController, broker: int, previous_broker_epoch: int) -> None:
    """A new incarnation of ``broker`` registers, naming the epoch of its clean-shutdown
    marker (-1 when it crashed)."""
    apply(c, c.cluster.register_broker(
        broker, uuid.uuid4(), [("PLAINTEXT", "h", 9000 + broker, 0)], None,
        c.image.brokers[broker].epoch + 100, unfence=False,
        previous_broker_epoch=previous_broker_epoch).records)


def test_a_replica_back_from_an_unclean_shutdown_leaves_the_elr() -> None:
    """KIP-966: a broker killed -9 may have lost records it acknowledged, so its new
    incarnation is no longer eligible and cannot be elected cleanly; one that shut down
    cleanly stays eligible. The last known ELR keeps the leader the partition had when
    its ISR became empty (Kafka's balanced recovery), not every replica that left."""
    c = elr_cluster(True)
    fence(c, 3)
    fence(c, 2)
    fence(c, 1)
    part = c.image.topics_by_name["t"].partitions[0]
    assert sorted(part.elr) == [1, 2]
    restart(c, 2, previous_broker_epoch=-1)  # crashed: no marker
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr, part.last_known_elr) == (-1, [], [1], [1])
    epoch = c.image.brokers[2].epoch
    apply(c, c.cluster.broker_heartbeat(2, epoch, 10**9, False, False, 10**6 + 1).records)
    assert c.image.topics_by_name["t"].partitions[0].leader == -1  # not eligible
    restart(c, 1, previous_broker_epoch=c.image.brokers[1].epoch)  # clean shutdown
    part = c.image.topics_by_name["t"].partitions[0]
    assert part.elr == [1]
    epoch = c.image.brokers[1].epoch
    apply(c, c.cluster.broker_heartbeat(1, epoch, 10**9, False, False, 10**6 + 2).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr) == (1, [1])


def test_the_last_leader_back_from_a_crash_leads_again_when_nobody_is_eligible() -> None:
    """KIP-966's balanced recovery, as Kafka 4.4 does it: with the ISR and the ELR both
    empty (every eligible replica crashed), the partition's last leader may lead again,
    uncleanly (it recovers first, KIP-704) and alone in the ISR; another replica back
    from a crash may not."""
    c = elr_cluster(True)
    fence(c, 3)
    fence(c, 2)
    fence(c, 1)
    restart(c, 2, previous_broker_epoch=-1)
    restart(c, 1, previous_broker_epoch=-1)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr, part.last_known_elr) == (-1, [], [], [1])
    epoch = c.image.brokers[2].epoch
    apply(c, c.cluster.broker_heartbeat(2, epoch, 10**9, False, False, 10**6 + 1).records)
    assert c.image.topics_by_name["t"].partitions[0].leader == -1  # not its last leader
    epoch = c.image.brokers[1].epoch
    apply(c, c.cluster.broker_heartbeat(1, epoch, 10**9, False, False, 10**6 + 2).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr, part.last_known_elr,
            part.leader_recovery_state) == (1, [1], [], [], 1)


def test_a_single_replica_comes_back_after_its_broker_crashed() -> None:
    """One broker, replication factor 1, ELR on (a new Kafka 4.4 cluster): a restart
    after kill -9 empties the ISR, and the broker leads its partitions again once it is
    unfenced, as Kafka 4.4's last known leader election does."""
    c = QuorumController(1, rng=random.Random(1))
    apply(c, [r.FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1)])
    apply(c, c.cluster.register_broker(1, uuid.uuid4(), [("PLAINTEXT", "h", 9001, 0)],
                                       None, 1).records)
    apply(c, c.replication.create_topics([NewTopic(
        "t", assignments={0: [1]}, configs={"min.insync.replicas": "1"})]).records)
    restart(c, 1, previous_broker_epoch=-1)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.elr, part.last_known_elr) == (-1, [], [], [1])
    epoch = c.image.brokers[1].epoch
    apply(c, c.cluster.broker_heartbeat(1, epoch, 10**9, False, False, 10**6).records)
    part = c.image.topics_by_name["t"].partitions[0]
    assert (part.leader, part.isr, part.last_known_elr) == (1, [1], [])


def test_without_elr_an_unclean_restart_changes_no_partition() -> None:
    c = elr_cluster(False)
    fence(c, 3)
    before = c.image.topics_by_name["t"].partitions[0]
    restart(c, 3, previous_broker_epoch=-1)
    after = c.image.topics_by_name["t"].partitions[0]
    assert (after.isr, after.partition_epoch) == (before.isr, before.partition_epoch)
