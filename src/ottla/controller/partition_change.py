"""The one place that decides a partition's leader and ISR (Kafka's
PartitionChangeBuilder): fencing and unfencing brokers, AlterPartition, preferred and
unclean elections all describe what they want here and get the PartitionChangeRecord
that says it, or None when nothing changes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Container, Sequence
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
                 live: Container[int], election: Election = Election.ONLINE) -> None:
        self.topic_id = topic_id
        self.index = index
        self.part = part
        self.live = live
        self.election = election
        self.target_isr: list[int] | None = None
        self.recovery_state: int | None = None
        self.target_replicas: list[int] | None = None
        self.target_adding: list[int] = list(part.adding_replicas)
        self.target_removing: list[int] = list(part.removing_replicas)
        self.elr_min_isr: int | None = None
        """``min.insync.replicas`` when Eligible Leader Replicas are kept (KIP-966)."""
        self.unclean_shutdown: Collection[int] = ()
        """Replicas whose broker came back from an unclean shutdown: never eligible."""
        self.target_directories: dict[int, uuid.UUID] = {
            b: part.directory(b) for b in part.replicas}
        self.default_dir: Callable[[int], uuid.UUID] | None = None
        """Where a replica new to the partition goes (Kafka's ``DefaultDirProvider``);
        None where directories are not tracked (metadata.version before 3.7-IV2)."""

    def with_directory(self, broker_id: int, directory: uuid.UUID) -> PartitionChangeBuilder:
        """``broker_id`` keeps its replica in log dir ``directory`` (AssignReplicasToDirs)."""
        self.target_directories[broker_id] = directory
        return self

    def with_default_dir(self, default_dir: Callable[[int], uuid.UUID]
                         ) -> PartitionChangeBuilder:
        """Track each replica's log dir (KIP-858): a replica the change adds goes to
        ``default_dir(broker)``."""
        self.default_dir = default_dir
        return self

    def with_elr(self, min_insync_replicas: int) -> PartitionChangeBuilder:
        """Keep Eligible Leader Replicas (KIP-966): a replica that leaves an ISR smaller
        than ``min_insync_replicas`` has every record the high watermark (which then
        stops) covers, so it stays eligible; the ISR may become empty, and a leaderless
        partition is led by a live eligible replica before any unclean choice."""
        self.elr_min_isr = min_insync_replicas
        return self

    def with_unclean_shutdown(self, brokers: Collection[int]) -> PartitionChangeBuilder:
        """Brokers that restarted without a clean shutdown (KIP-966): their logs may
        have lost records they acknowledged, so they leave the ISR and the ELR (the last
        known ELR still remembers them)."""
        self.unclean_shutdown = brokers
        return self

    def with_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self.target_isr = list(isr)
        return self

    def with_replicas(self, replicas: Sequence[int], adding: Sequence[int] = (),
                      removing: Sequence[int] = ()) -> PartitionChangeBuilder:
        """A reassignment's replica set (KIP-455): started (the target and the replicas
        leaving, with those joining and leaving named), completed or cancelled (the
        final set, nothing adding or removing). The ISR keeps only replicas of it, and a
        leader outside it is replaced."""
        self.target_replicas = list(replicas)
        self.target_adding = list(adding)
        self.target_removing = list(removing)
        return self

    def _replicas(self) -> list[int]:
        return self.part.replicas if self.target_replicas is None else self.target_replicas

    def with_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.recovery_state = state
        return self

    def leader_and_isr(self) -> tuple[int, list[int]]:
        """The leader and ISR the change leads to."""
        leader, isr, _, _ = self._decide()
        return leader, isr

    def _target_elr(self, isr: list[int], replicas: list[int]) -> tuple[list[int], list[int]]:
        """Kafka's maybePopulateTargetElr: with the ISR at least min.insync.replicas, no
        ELR; below it, every replica that was in the ISR or ELR and is not in the new
        ISR (the last known ELR keeps the rest of what it knew)."""
        part = self.part
        if self.elr_min_isr is None or len(isr) >= self.elr_min_isr:
            return [], []
        candidates = set(part.elr) | set(part.isr)
        elr = [b for b in replicas if b in candidates and b not in isr
               and b not in self.unclean_shutdown]
        known = candidates | set(part.last_known_elr)
        last_known = [b for b in replicas if b in known and b not in isr and b not in elr]
        return elr, last_known

    def _decide(self) -> tuple[int, list[int], list[int], list[int]]:
        """Leader, ISR, ELR and last known ELR after the change."""
        part = self.part
        replicas = self._replicas()
        isr = list(part.isr) if self.target_isr is None else self.target_isr
        isr = [b for b in isr if b in replicas]
        elr, last_known = self._target_elr(isr, replicas)
        in_sync = [b for b in replicas if b in isr and b in self.live]
        preferred = replicas[0] if replicas else NO_LEADER
        if self.election == Election.PREFERRED and preferred in in_sync:
            return preferred, isr, elr, last_known
        if part.leader in isr and part.leader in self.live:
            return part.leader, isr, elr, last_known
        if in_sync:
            return in_sync[0], isr, elr, last_known
        if not isr:
            eligible = [b for b in replicas if b in elr and b in self.live]
            if eligible:  # KIP-966: it has everything committed
                chosen = eligible[0]
                return chosen, [chosen], [b for b in elr if b != chosen], last_known
        if self.election == Election.UNCLEAN:
            chosen = next((b for b in replicas if b in self.live), None)
            if chosen is not None:
                return chosen, [chosen], [], []  # an unclean leader forgets the ELR
        return NO_LEADER, isr, elr, last_known

    def _unclean(self, leader: int) -> bool:
        """Whether ``leader`` was chosen from outside the ISR and the ELR."""
        isr = list(self.part.isr) if self.target_isr is None else self.target_isr
        return leader != NO_LEADER and leader not in isr and leader not in self.part.elr

    def _target_directories(self, replicas: list[int], changes_replicas: bool
                            ) -> tuple[uuid.UUID, ...] | None:
        """The directories after the change, if they change (Kafka's
        ``setAssignmentChanges``); always with new replicas, whose order they follow."""
        if self.default_dir is None:
            return None
        targets = self.target_directories
        directories = [targets[b] if b in targets else self.default_dir(b) for b in replicas]
        if not changes_replicas and directories == self.part.directory_list():
            return None
        return tuple(directories)

    def build(self) -> r.PartitionChangeRecord | None:
        part = self.part
        leader, isr, elr, last_known = self._decide()
        changes_elr = elr != list(part.elr)
        changes_last_known = last_known != list(part.last_known_elr)
        recovery = self.recovery_state
        if self._unclean(leader):
            # KIP-704: an unclean leader recovers its log before it takes followers.
            recovery = RECOVERING
        changes_recovery = recovery is not None and recovery != part.leader_recovery_state
        replicas = self._replicas()
        changes_replicas = replicas != list(part.replicas) or \
            self.target_adding != list(part.adding_replicas) or \
            self.target_removing != list(part.removing_replicas)
        directories = self._target_directories(replicas, replicas != list(part.replicas))
        if leader == part.leader and isr == list(part.isr) and not changes_recovery and \
                not changes_replicas and not changes_elr and not changes_last_known and \
                directories is None:
            return None
        return r.PartitionChangeRecord(
            partition_id=self.index, topic_id=self.topic_id,
            leader=leader if leader != part.leader else NO_CHANGE,
            isr=tuple(isr) if isr != list(part.isr) else None,
            replicas=tuple(replicas) if changes_replicas else None,
            adding_replicas=tuple(self.target_adding) if changes_replicas else None,
            removing_replicas=tuple(self.target_removing) if changes_replicas else None,
            leader_recovery_state=recovery if changes_recovery else -1,
            eligible_leader_replicas=tuple(elr) if changes_elr else None,
            last_known_elr=tuple(last_known) if changes_last_known else None,
            directories=directories)
