"""A consumer group of the KIP-848 protocol: three epochs, a target assignment computed
by the broker, and each member reconciled toward it one heartbeat at a time.

``reconcile`` is Kafka's CurrentAssignmentBuilder (seed 000): a member keeps what it owns
of its target, must revoke the rest before it may advance its epoch (revoke before
assign), and never receives a partition another member still owns (no double ownership).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.assignors import Assignment
from ottla.coordinator.group.consumer_protocol import PROTOCOL_TYPE

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def copy_assignment(assignment: Assignment) -> Assignment:
    return {t: set(ps) for t, ps in assignment.items() if ps}


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group: its session timeout and the protocols it joined with, in its order of
    preference (the first is the one it is told to use)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    def metadata(self, protocol: str) -> bytes:
        return next(data for name, data in self.protocols if name == protocol)

    def to_record(self) -> rec.ClassicMemberMetadata:
        return rec.ClassicMemberMetadata(
            session_timeout_ms=self.session_timeout_ms,
            supported_protocols=tuple(rec.ClassicProtocol(name=name, metadata=data)
                                      for name, data in self.protocols))

    @classmethod
    def from_record(cls, value: rec.ClassicMemberMetadata | None) -> ClassicMetadata | None:
        if value is None:
            return None
        return cls(value.session_timeout_ms,
                   tuple((p.name, bytes(p.metadata)) for p in value.supported_protocols))


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMetadata | None = None
    """Set for a member that uses the classic protocol."""

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_record(self, group_id: str) -> rec.CoordinatorRecord:
        return rec.CoordinatorRecord(
            rec.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=self.member_id),
            rec.ConsumerGroupMemberMetadataValue(
                instance_id=self.instance_id, rack_id=self.rack_id, client_id=self.client_id,
                client_host=self.client_host,
                subscribed_topic_names=tuple(self.subscribed_topic_names),
                subscribed_topic_regex=self.subscribed_topic_regex,
                rebalance_timeout_ms=self.rebalance_timeout_ms,
                server_assignor=self.server_assignor,
                classic_member_metadata=self.classic.to_record() if self.classic else None))

    def assignment_record(self, group_id: str) -> rec.CoordinatorRecord:
        return rec.CoordinatorRecord(
            rec.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id,
                                                        member_id=self.member_id),
            rec.ConsumerGroupCurrentMemberAssignmentValue(
                member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch,
                state=int(self.state), assigned_partitions=to_topic_partitions(self.assigned),
                partitions_pending_revocation=to_topic_partitions(self.pending_revocation)))

    def same_metadata(self, other: ConsumerMember) -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                tuple(self.subscribed_topic_names), self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor, self.classic) == \
            (other.instance_id, other.rack_id, other.client_id, other.client_host,
             tuple(other.subscribed_topic_names), other.subscribed_topic_regex,
             other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def same_assignment(self, other: ConsumerMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation) == (other.member_epoch, other.previous_member_epoch,
                                             other.state, other.assigned,
                                             other.pending_revocation)


def to_topic_partitions(assignment: Assignment) -> tuple[rec.TopicPartitions, ...]:
    return tuple(rec.TopicPartitions(topic_id=t, partitions=tuple(sorted(ps)))
                 for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps)


def from_topic_partitions(items: tuple[rec.TopicPartitions, ...]) -> Assignment:
    return {tp.topic_id: set(tp.partitions) for tp in items if tp.partitions}


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    """When the group last became empty (offset retention counts from there)."""

    @property
    def group_type(self) -> str:
        return "consumer"

    @property
    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or \
                    member.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None and old.instance_id is not None and \
                self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def owner_epoch(self, topic_id: uuid.UUID, partition: int, exclude: str) -> int:
        """The epoch of the member that owns (or is still revoking) a partition, -1 if
        nobody other than ``exclude`` does."""
        for member in self.members.values():
            if member.member_id == exclude:
                continue
            if partition in member.assigned.get(topic_id, ()) or \
                    partition in member.pending_revocation.get(topic_id, ()):
                return member.member_epoch
        return -1

    # --- members of both protocols (online migration) ----------------------------------------

    def classic_member_count(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a classic member with these protocols may join: the embedded consumer
        protocol, sharing a protocol with every classic member already here."""
        if protocol_type != PROTOCOL_TYPE:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not self.members:
            return bool(names)
        return any(all(name in {p for p, _ in c.protocols} for c in classic)
                   for name in names)

    def all_members_use_classic_except(self, member_id: str) -> bool:
        """True if ``member_id`` is the one member on the consumer protocol left."""
        member = self.members.get(member_id)
        return member is not None and not member.uses_classic_protocol and \
            self.classic_member_count() == len(self.members) - 1

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic, partitions in self.target.get(member.member_id, {}).items():
            have = member.assigned.get(topic, set())
            for partition in partitions - have:
                if self.owner_epoch(topic, partition, member.member_id) != -1:
                    return True
        return False

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
        return names

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for, else the default (seed 000)."""
        votes: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda name: votes[name])


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    """Whether the member still reports owning any partition it must revoke; a member that
    does not report its partitions is assumed to still own them."""
    if owned is None:
        return bool(revoking)
    return any(owned.get(t, set()) & ps for t, ps in revoking.items())


def reconcile(group: ConsumerGroup, member: ConsumerMember, target: Assignment,
              target_epoch: int, owned: Assignment | None) -> ConsumerMember:
    """One step of the member state machine toward ``target`` (CurrentAssignmentBuilder)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next_assignment(group, member, member.member_epoch, target, target_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(group, member, member.member_epoch, target, target_epoch, owned)
    return _next_assignment(group, member, member.member_epoch, target, target_epoch, owned)


def _next_assignment(group: ConsumerGroup, member: ConsumerMember, member_epoch: int,
                     target: Assignment, target_epoch: int, owned: Assignment | None
                     ) -> ConsumerMember:
    unreleased = False
    assigned: Assignment = {}
    revoking: Assignment = {}
    pending: Assignment = {}
    for topic in set(target) | set(member.assigned):
        want = target.get(topic, set())
        have = member.assigned.get(topic, set())
        keep = have & want
        revoke = have - keep
        to_add = want - keep
        blocked = {p for p in to_add if group.owner_epoch(topic, p, member.member_id) != -1}
        unreleased = unreleased or bool(blocked)
        to_add -= blocked
        if keep:
            assigned[topic] = keep
        if revoke:
            revoking[topic] = revoke
        if to_add:
            pending[topic] = to_add
    if revoking and _owns_any(owned, revoking):
        # Revoke before assign: stay on this epoch until the client lets them go.
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS,
                       previous_member_epoch=member.member_epoch, member_epoch=member_epoch,
                       assigned=assigned, pending_revocation=revoking)
    for topic, partitions in pending.items():
        assigned.setdefault(topic, set()).update(partitions)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, state=state, previous_member_epoch=member.member_epoch,
                   member_epoch=target_epoch, assigned=assigned, pending_revocation={})
