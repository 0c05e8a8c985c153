"""A partition leader's proposed ISR, as one partition of an AlterPartition request carries
it (KIP-497, with the members' broker epochs of KIP-903).

The leader's AlterPartitionManager sends it and the controller's ReplicationControl
decides it, so it lives here, below both: one type for one concept on both sides of the
wire.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

UNKNOWN_BROKER_EPOCH = -1
"""A member's broker epoch the leader does not know (or AlterPartition before v3): the
controller checks only that the member is eligible."""


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request. ``new_isr``: (broker, broker epoch or
    -1); ``partition_epoch`` and ``leader_epoch`` are those the change was decided on, so
    the controller refuses a change the metadata has overtaken."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]
    leader_recovery_state: int
    partition_epoch: int

    @classmethod
    def proposed(cls, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                 isr: Iterable[int], broker_epochs: Mapping[int, int], partition_epoch: int,
                 leader_recovery_state: int = 0) -> IsrChange:
        """A leader's proposal: ``isr`` with each member's broker epoch as the leader knows
        it from ``broker_epochs`` (UNKNOWN_BROKER_EPOCH for one it does not)."""
        return cls(topic_id, partition, leader_epoch,
                   tuple((b, broker_epochs.get(b, UNKNOWN_BROKER_EPOCH)) for b in isr),
                   leader_recovery_state, partition_epoch)

    @property
    def isr(self) -> list[int]:
        """The proposed members, in order, without their broker epochs."""
        return [b for b, _ in self.new_isr]

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        """(topic id, partition): what AlterPartition's answers are keyed by."""
        return self.topic_id, self.partition
