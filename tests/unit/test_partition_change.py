"""PartitionChangeBuilder: the one place leader and ISR changes are decided."""

from __future__ import annotations

import uuid

from ottla.controller.partition_change import NO_CHANGE, Election, PartitionChangeBuilder
from ottla.metadata.image import NO_LEADER, PartitionRegistration

TOPIC = uuid.uuid4()


def part(replicas: list[int], isr: list[int], leader: int, recovery: int = 0
         ) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, leader_epoch=3, partition_epoch=7,
                                 leader_recovery_state=recovery)


def test_nothing_to_change_builds_nothing() -> None:
    assert PartitionChangeBuilder(TOPIC, 0, part([1, 2], [1, 2], 1), {1, 2}).build() is None
    # The same ISR given again is no change either (a no-op AlterPartition).
    assert PartitionChangeBuilder(TOPIC, 0, part([1, 2], [1, 2], 1), {1, 2}) \
        .with_isr([1, 2]).build() is None


def test_a_live_in_sync_leader_stays_and_only_the_isr_is_written() -> None:
    record = PartitionChangeBuilder(TOPIC, 4, part([1, 2, 3], [1, 2, 3], 2), {1, 2, 3}) \
        .with_isr([2, 3]).build()
    assert record is not None
    assert (record.partition_id, record.leader, record.isr) == (4, NO_CHANGE, (2, 3))


def test_a_leader_that_left_is_replaced_by_the_first_live_in_sync_replica() -> None:
    # Replica order decides, as in Kafka: 3 comes before 2 in the replicas.
    record = PartitionChangeBuilder(TOPIC, 0, part([1, 3, 2], [2, 3], 1), {2, 3}).build()
    assert record is not None and record.leader == 3
    record = PartitionChangeBuilder(TOPIC, 0, part([1, 3, 2], [1], 1), {2, 3}).build()
    assert record is not None and record.leader == NO_LEADER and record.isr is None


def test_preferred_election_takes_the_first_replica_only_if_live_and_in_sync() -> None:
    record = PartitionChangeBuilder(TOPIC, 0, part([1, 2], [1, 2], 2), {1, 2},
                                    Election.PREFERRED).build()
    assert record is not None and record.leader == 1
    assert PartitionChangeBuilder(TOPIC, 0, part([1, 2], [2], 2), {1, 2},
                                  Election.PREFERRED).build() is None
    assert PartitionChangeBuilder(TOPIC, 0, part([1, 2], [1, 2], 2), {2},
                                  Election.PREFERRED).build() is None


def test_unclean_election_picks_a_live_replica_out_of_sync_and_resets_the_isr() -> None:
    record = PartitionChangeBuilder(TOPIC, 0, part([1, 2, 3], [1], NO_LEADER), {3, 2},
                                    Election.UNCLEAN).build()
    assert record is not None and (record.leader, record.isr) == (2, (2,))
    # Without UNCLEAN the same partition stays leaderless.
    assert PartitionChangeBuilder(TOPIC, 0, part([1, 2, 3], [1], NO_LEADER), {3, 2}
                                  ).build() is None


def test_a_recovery_state_change_alone_is_a_change() -> None:
    record = PartitionChangeBuilder(TOPIC, 0, part([1], [1], 1, recovery=1), {1}) \
        .with_recovery_state(0).build()
    assert record is not None
    assert (record.leader, record.isr, record.leader_recovery_state) == (NO_CHANGE, None, 0)
