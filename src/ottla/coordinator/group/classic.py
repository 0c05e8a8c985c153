"""A classic (JoinGroup/SyncGroup) group: members, generations and the five states.

The state machine is Kafka's ClassicGroupState: EMPTY -> PREPARING_REBALANCE ->
COMPLETING_REBALANCE -> STABLE, back-edges to PREPARING_REBALANCE, and DEAD from anywhere.
The broker never interprets assignments: the elected leader's client-side assignor does.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_protocol import PROTOCOL_TYPE
from ottla.coordinator.runtime import Reply


class ClassicState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    ClassicState.EMPTY: {ClassicState.PREPARING_REBALANCE},
    ClassicState.PREPARING_REBALANCE: {ClassicState.EMPTY, ClassicState.STABLE,
                                       ClassicState.COMPLETING_REBALANCE},
    ClassicState.COMPLETING_REBALANCE: {ClassicState.PREPARING_REBALANCE},
    ClassicState.STABLE: {ClassicState.COMPLETING_REBALANCE},
    ClassicState.DEAD: {ClassicState.EMPTY, ClassicState.PREPARING_REBALANCE,
                        ClassicState.COMPLETING_REBALANCE, ClassicState.STABLE,
                        ClassicState.DEAD},
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_reply: Reply | None = None
    join_version: int = 0
    sync_reply: Reply | None = None
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicState = ClassicState.EMPTY
    previous_state: ClassicState = ClassicState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    current_state_timestamp: int = -1
    new_member_added: bool = False
    """Set while a delayed initial join may still be extended by new members."""
    subscribed_topics: set[str] | None = None
    """Topics the members subscribe to (consumer protocol), None if unknown."""

    @property
    def group_type(self) -> str:
        return "classic"

    def transition(self, target: ClassicState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"Group {self.group_id} cannot go from {self.state.value} to {target.value}")
        self.previous_state, self.state = self.state, target
        self.current_state_timestamp = now_ms

    def is_in(self, *states: ClassicState) -> bool:
        return self.state in states

    # --- members ---------------------------------------------------------------------

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next((m.member_id for m in self.members.values()
                                   if m.awaiting_join), next(iter(self.members), None))
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (seed 000: the group's type must
        match and it must share a protocol with every member)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if self.protocol_type != protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Every member votes for its most preferred candidate; the plurality wins, ties
        going to the protocol listed first by the earliest member."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        order: list[str] = []
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            votes[choice] += 1
            for name in member.protocol_names():
                if name in candidates and name not in order:
                    order.append(name)
        best = max(votes.values())
        return next(name for name in order if votes.get(name) == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(ClassicState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition(ClassicState.EMPTY, now_ms)
        self.new_member_added = False

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed, so offsets are kept (as Kafka does)."""
        if self.state is ClassicState.EMPTY:
            return False
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # --- records -------------------------------------------------------------------------

    def to_record(self, now_ms: int) -> rec.CoordinatorRecord:
        members = tuple(rec.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(self.protocol_name) if self.protocol_name else b"",
            assignment=m.assignment) for m in self.members.values())
        return rec.CoordinatorRecord(
            rec.GroupMetadataKey(group=self.group_id),
            rec.GroupMetadataValue(protocol_type=self.protocol_type or "",
                                   generation=self.generation_id, protocol=self.protocol_name,
                                   leader=self.leader_id, current_state_timestamp=now_ms,
                                   members=members))

    @classmethod
    def from_record(cls, group_id: str, value: Any) -> ClassicGroup:
        group = cls(group_id, state=ClassicState.STABLE if value.members else ClassicState.EMPTY,
                    generation_id=value.generation, protocol_type=value.protocol_type or None,
                    protocol_name=value.protocol, leader_id=value.leader,
                    current_state_timestamp=value.current_state_timestamp)
        for m in value.members:
            group.add(ClassicMember(m.member_id, m.group_instance_id, m.client_id,
                                    m.client_host, m.rebalance_timeout, m.session_timeout,
                                    value.protocol_type, [(value.protocol or "", m.subscription)],
                                    m.assignment))
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (version int16, then an array of
    strings); None if it cannot be parsed."""
    try:
        view = memoryview(subscription)
        if len(view) < 6:
            return None
        count = int.from_bytes(view[2:6], "big", signed=True)
        if count < 0:
            return None
        pos = 6
        topics = set()
        for _ in range(count):
            length = int.from_bytes(view[pos:pos + 2], "big", signed=True)
            pos += 2
            if length < 0 or pos + length > len(view):
                return None
            topics.add(bytes(view[pos:pos + length]).decode())
            pos += length
        return topics
    except (ValueError, UnicodeDecodeError):
        return None
