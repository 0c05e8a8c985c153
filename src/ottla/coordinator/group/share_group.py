"""A share group (KIP-932): members that read the same partitions cooperatively, with a
target assignment computed by the broker's ``simple`` assignor and no revocation step.

Unlike a consumer group, a partition may be assigned to several members at once (the
partition's leader hands each record to one member at a time), so a member moves straight
to its target assignment and epoch (Kafka's ShareGroupAssignmentBuilder): its state is
always STABLE and the group is Empty or Stable.
"""

from __future__ import annotations

import enum
import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ottla.common.server_config import KafkaConfig
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.assignors import Assignment
from ottla.coordinator.group.consumer_group import (
    MemberState,
    from_topic_partitions,
    to_topic_partitions,
)

PROTOCOL_TYPE = "share"
ASSIGNOR_NAME = "simple"
LEAVE_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """The ``group.share.*`` broker configs of membership (Kafka's defaults), with the
    per-group overrides (GROUP config resources) that beat them."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    group_overrides: Callable[[str], Mapping[str, str]] = lambda _group_id: {}

    def session_timeout(self, group_id: str) -> int:
        value = self.group_overrides(group_id).get("share.session.timeout.ms")
        return self.session_timeout_ms if value is None else int(value)

    def heartbeat_interval(self, group_id: str) -> int:
        value = self.group_overrides(group_id).get("share.heartbeat.interval.ms")
        return self.heartbeat_interval_ms if value is None else int(value)

    @classmethod
    def from_config(cls, config: KafkaConfig,
                    group_overrides: Callable[[str], Mapping[str, str]] | None = None
                    ) -> ShareGroupConfig:
        return cls(int(config["group.share.session.timeout.ms"]),
                   int(config["group.share.heartbeat.interval.ms"]),
                   int(config["group.share.max.size"]),
                   group_overrides or (lambda _group_id: {}))


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)

    def metadata_record(self, group_id: str) -> rec.CoordinatorRecord:
        return rec.CoordinatorRecord(
            rec.ShareGroupMemberMetadataKey(group_id=group_id, member_id=self.member_id),
            rec.ShareGroupMemberMetadataValue(
                rack_id=self.rack_id, client_id=self.client_id, client_host=self.client_host,
                subscribed_topic_names=self.subscribed_topic_names))

    def assignment_record(self, group_id: str) -> rec.CoordinatorRecord:
        return rec.CoordinatorRecord(
            rec.ShareGroupCurrentMemberAssignmentKey(group_id=group_id,
                                                     member_id=self.member_id),
            rec.ShareGroupCurrentMemberAssignmentValue(
                member_epoch=self.member_epoch, previous_member_epoch=self.previous_member_epoch,
                state=int(MemberState.STABLE),  # the one state a share member is in
                assigned_partitions=to_topic_partitions(self.assigned)))

    def same_metadata(self, other: ShareMember) -> bool:
        return (self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names) == (other.rack_id, other.client_id,
                                                 other.client_host, other.subscribed_topic_names)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)

    @property
    def group_type(self) -> str:
        return "share"

    @property
    def protocol_type(self) -> str:
        return PROTOCOL_TYPE

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}


def replay_assignment(value: rec.ShareGroupCurrentMemberAssignmentValue | None,
                      member: ShareMember) -> None:
    if value is None:
        member.member_epoch, member.previous_member_epoch, member.assigned = 0, -1, {}
    else:
        member.member_epoch = value.member_epoch
        member.previous_member_epoch = value.previous_member_epoch
        member.assigned = from_topic_partitions(value.assigned_partitions)


def metadata_hash(topics: Mapping[str, tuple[uuid.UUID, int]], names: set[str]) -> int:
    """Changes when a subscribed topic appears, goes, is recreated or grows: the group
    epoch is bumped and the target assignment recomputed (KIP-1101's role)."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        if name in topics:
            topic_id, count = topics[name]
            digest.update(f"{name}/{topic_id}/{count};".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


# --- share-partition lag (KIP-1226) ------------------------------------------------------------

UNINITIALIZED = -1
"""A start offset, delivery-complete count or lag that is not known (Kafka's
PartitionFactory.UNINITIALIZED_START_OFFSET, UNINITIALIZED_DELIVERY_COMPLETE_COUNT and
UNINITIALIZED_LAG)."""


def has_lag(start_offset: int, delivery_complete_count: int) -> bool:
    """Kafka's shouldComputeSharePartitionLag: a lag needs a known start offset and a known
    delivery-complete count (a state initialized without a start offset has neither)."""
    return start_offset != UNINITIALIZED and delivery_complete_count != UNINITIALIZED


def share_partition_lag(end_offset: int, start_offset: int,
                        delivery_complete_count: int) -> int:
    """The records a share group still has to deliver on a partition: those from its start
    offset to the partition's end offset (the high watermark, the offset of the next
    record) less those at or past the start offset already acknowledged or archived.
    UNINITIALIZED when the state cannot tell."""
    if not has_lag(start_offset, delivery_complete_count):
        return UNINITIALIZED
    return end_offset - start_offset - delivery_complete_count


# --- the simple assignor ---------------------------------------------------------------------

def simple_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]],
                  partitions: Mapping[uuid.UUID, int],
                  previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's ``simple`` share assignor, topic by topic: every partition of a subscribed
    topic goes to at least one of its subscribers, evenly. With fewer subscribers than
    partitions each partition has one member and the members' counts differ by at most
    one; with more, each subscriber gets one partition of the topic and the partitions'
    member counts differ by at most one (a partition is shared). Previous assignments are
    kept where the balance allows, so members keep their share sessions."""
    result: dict[str, Assignment] = {m: {} for m in subscriptions}
    for topic in sorted(partitions, key=str):
        count = partitions[topic]
        subscribers = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not subscribers or count <= 0:
            continue
        kept = {m: sorted(p for p in previous.get(m, {}).get(topic, ()) if p < count)
                for m in subscribers}
        for member, owned in _assign_topic(subscribers, count, kept).items():
            if owned:
                result[member][topic] = owned
    return result


class _Quota:
    """Counts that must come out as ``base`` or ``base + 1``, ``extra`` of them the latter."""

    def __init__(self, keys: list[str] | list[int], total: int) -> None:
        self.base, self.extra = divmod(total, len(keys))
        self.count = dict.fromkeys(keys, 0)

    def has_room(self, key: str | int) -> bool:
        n = self.count[key]
        return n < self.base or (n == self.base and self.extra > 0)

    def take(self, key: str | int) -> None:
        self.count[key] += 1
        if self.count[key] == self.base + 1:
            self.extra -= 1


def _assign_topic(members: list[str], count: int, kept: Mapping[str, list[int]]
                  ) -> dict[str, set[int]]:
    slots = max(count, len(members))  # one member per partition, or one partition per member
    by_member = _Quota(members, slots)
    by_partition = _Quota(list(range(count)), slots)
    owned: dict[str, set[int]] = {m: set() for m in members}

    def give(member: str, partition: int) -> None:
        owned[member].add(partition)
        by_member.take(member)
        by_partition.take(partition)

    for member in members:
        for partition in kept[member]:
            if by_member.has_room(member) and by_partition.has_room(partition):
                give(member, partition)
    for _ in range(slots - sum(by_member.count.values())):
        member = min((m for m in members if by_member.has_room(m)),
                     key=lambda m: (by_member.count[m], m))
        partition = min((p for p in range(count)
                         if by_partition.has_room(p) and p not in owned[member]),
                        key=lambda p: (by_partition.count[p], p))
        give(member, partition)
    return owned
