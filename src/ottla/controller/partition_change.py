"""The one place that decides a partition's leader and ISR (Kafka's
PartitionChangeBuilder): fencing and unfencing brokers, AlterPartition, preferred and
unclean elections all describe what they want here and get the PartitionChangeRecord
that says it, or None when nothing changes."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from enum import Enum

from ottla.metadata import records as r
from ottla.metadata.image import NO_LEADER, PartitionRegistration

NO_CHANGE = -2
"""PartitionChangeRecord's leader when the leader stays."""
RECOVERED, RECOVERING = 0, 1
"""Leader recovery states (KIP-704)."""


class Election(Enum):
    ONLINE = "online"
    """Keep a live in-sync leader; else the first live in-sync replica, in replica order."""
    PREFERRED = "preferred"
    """The first replica if it is live and in sync; else as ONLINE."""
    UNCLEAN = "unclean"
    """As ONLINE; with no live in-sync replica, the first live replica, alone in the ISR
    (what the old ISR had beyond it may be lost)."""


class PartitionChangeBuilder:
    def __init__(self, topic_id: uuid.UUID, index: int, part: PartitionRegistration,
                 live: Collection[int], election: Election = Election.ONLINE) -> None:
        self.topic_id = topic_id
        self.index = index
        self.part = part
        self.live = live
        self.election = election
        self.target_isr: list[int] | None = None
        self.recovery_state: int | None = None

    def with_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_isr = list(isr)
        return self

    def with_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.recovery_state = state
        return self

    def leader_and_isr(self) -> tuple[int, list[int]]:
        """The leader and ISR the change leads to."""
        part = self.part
        isr = list(part.isr) if self.target_isr is None else self.target_isr
        in_sync = [b for b in part.replicas if b in isr and b in self.live]
        preferred = part.replicas[0] if part.replicas else NO_LEADER
        if self.election == Election.PREFERRED and preferred in in_sync:
            return preferred, isr
        if part.leader in isr and part.leader in self.live:
            return part.leader, isr
        if in_sync:
            return in_sync[0], isr
        if self.election == Election.UNCLEAN:
            chosen = next((b for b in part.replicas if b in self.live), None)
            if chosen is not None:
                return chosen, [chosen]
        return NO_LEADER, isr

    def _unclean(self, leader: int) -> bool:
        """Whether ``leader`` was chosen from outside the ISR."""
        isr = list(self.part.isr) if self.target_isr is None else self.target_isr
        return leader != NO_LEADER and leader not in isr

    def build(self) -> r.PartitionChangeRecord | None:
        part = self.part
        leader, isr = self.leader_and_isr()
        recovery = self.recovery_state
        if self._unclean(leader):
            # KIP-704: an unclean leader recovers its log before it takes followers.
            recovery = RECOVERING
        changes_recovery = recovery is not None and recovery != part.leader_recovery_state
        if leader == part.leader and isr == list(part.isr) and not changes_recovery:
            return None
        return r.PartitionChangeRecord(
            partition_id=self.index, topic_id=self.topic_id,
            leader=leader if leader != part.leader else NO_CHANGE,
            isr=tuple(isr) if isr != list(part.isr) else None,
            leader_recovery_state=recovery if changes_recovery else -1)
