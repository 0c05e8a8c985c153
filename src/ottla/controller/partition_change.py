"""The one place that decides a partition's leader and ISR (Kafka's
PartitionChangeBuilder): fencing and unfencing brokers, AlterPartition, preferred and
unclean elections all describe what they want here and get the PartitionChangeRecord
that says it, or None when nothing changes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Container, Sequence
from enum import Enum
from typing import NamedTuple

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


class Decision(NamedTuple):
    """What a change decides: the leader, whether it was chosen uncleanly (from outside
    the ISR and the ELR, so it recovers its log first, KIP-704), and the ISR, ELR and
    last known ELR."""

    leader: int
    unclean: bool
    isr: list[int]
    elr: list[int]
    last_known_elr: list[int]


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
        have lost records they acknowledged, so they leave the ISR and the ELR; only the
        last known leader of a partition left with neither may lead it again."""
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
        decision = self._decide()
        return decision.leader, decision.isr

    def _target_elr(self, isr: list[int], replicas: list[int]) -> list[int]:
        """Kafka's maybePopulateTargetElr: with the ISR at least min.insync.replicas, no
        ELR; below it, every replica that was in the ISR or ELR, is not in the new ISR
        and did not come back from an unclean shutdown."""
        part = self.part
        if self.elr_min_isr is None or len(isr) >= self.elr_min_isr:
            return []
        candidates = set(part.elr) | set(part.isr)
        return [b for b in replicas if b in candidates and b not in isr
                and b not in self.unclean_shutdown]

    def _elect(self, replicas: list[int], isr: list[int], elr: list[int]
               ) -> tuple[int, bool]:
        """Kafka's electLeader: the leader and whether the election is unclean. A valid
        leader is live and in the ISR, or in the ELR when the ISR is empty; the current
        one stays if valid (after the preferred replica, for a preferred election). With
        none, the last known leader (KIP-966's balanced recovery: the ISR and ELR both
        empty, one leader remembered), then, if allowed, any live replica."""
        part = self.part

        def valid(b: int) -> bool:
            return (b in isr or (not isr and b in elr)) and b in self.live

        if self.election == Election.PREFERRED and replicas and valid(replicas[0]):
            return replicas[0], False
        if valid(part.leader):
            return part.leader, False
        chosen = next((b for b in replicas if valid(b)), None)
        if chosen is not None:
            return chosen, False
        if self.elr_min_isr is not None and not isr and not elr and \
                len(part.last_known_elr) == 1 and part.last_known_elr[0] in self.live:
            return part.last_known_elr[0], True
        if self.election == Election.UNCLEAN:
            chosen = next((b for b in replicas if b in self.live), None)
            if chosen is not None:
                return chosen, True
        return NO_LEADER, False

    def _last_known_elr(self, leader: int, isr: list[int]) -> list[int]:
        """Kafka's maybeUpdateLastKnownLeader: the last known ELR keeps the leader a
        partition had when its ISR became empty, until it has a leader again."""
        part = self.part
        if self.elr_min_isr is None:
            return list(part.last_known_elr)
        if not isr and isr != list(part.isr) and part.last_known_elr != [part.leader]:
            return [part.leader]
        if leader != NO_LEADER and part.last_known_elr:
            return []
        return list(part.last_known_elr)

    def _decide(self) -> Decision:
        part = self.part
        replicas = self._replicas()
        isr = list(part.isr) if self.target_isr is None else self.target_isr
        isr = [b for b in isr if b in replicas]
        elr = self._target_elr(isr, replicas)
        leader, unclean = self._elect(replicas, isr, elr)
        if leader != part.leader and leader != NO_LEADER:
            if leader in elr:
                isr, elr = [leader], [b for b in elr if b != leader]
            elif unclean:  # what the old ISR had beyond it may be lost
                isr, elr = [leader], []
        return Decision(leader, unclean and leader != part.leader, isr, elr,
                        self._last_known_elr(leader, isr))

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
        leader, unclean, isr, elr, last_known = self._decide()
        changes_elr = elr != list(part.elr)
        changes_last_known = last_known != list(part.last_known_elr)
        recovery = self.recovery_state
        if unclean:
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
