"""What the group coordinator shard's operations answer.

Most answers are the body (or one group's entry) of the Kafka response itself, a dict in
the shape of its kio schema that the handler puts on the wire, perhaps after filling in a
field or two: a TypedDict here names each of them with its fields. The others are what a
handler builds its response from: per-partition or per-group errors, and the answers of
LeaveGroup and OffsetDelete (named tuples, so they still unpack as the plain tuples they
were).
"""

from __future__ import annotations

import uuid
from typing import NamedTuple, NotRequired, TypedDict

from ottla.protocol.errors import ErrorCode

PartitionErrors = dict[tuple[str, int], ErrorCode]
"""OffsetCommit's and TxnOffsetCommit's answer: {(topic, partition): error}."""

GroupErrors = dict[str, ErrorCode]
"""DeleteGroups' answer: {group id: error}."""

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
"""A described group's ``authorized_operations`` when they were not asked for (Kafka's
Integer.MIN_VALUE)."""


class LeftMember(NamedTuple):
    """One member of a LeaveGroup, as LeaveGroup v3+ answers it."""

    member_id: str
    instance_id: str | None
    error: ErrorCode


class LeaveGroupAnswer(NamedTuple):
    """The group's error and each leaving member's (before v3 the request has one
    member, whose error becomes the response's)."""

    error: ErrorCode
    members: list[LeftMember]


class OffsetDeleteAnswer(NamedTuple):
    """The group's error, and with none each partition's (a topic the group subscribes
    to keeps its offsets: GROUP_SUBSCRIBED_TO_TOPIC)."""

    error: ErrorCode
    partitions: PartitionErrors


# --- the classic protocol ---------------------------------------------------------------------

class JoinGroupMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(TypedDict):
    """JoinGroup's response; ``members`` only for the leader."""

    throttle_time: int
    error_code: ErrorCode
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: list[JoinGroupMember]


class SyncGroupResponse(TypedDict):
    throttle_time: int
    error_code: ErrorCode
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


class DescribedGroupMember(TypedDict):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribedGroup(TypedDict):
    """One group of DescribeGroups; the handler adds the last two fields."""

    error_code: ErrorCode
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedGroupMember]
    authorized_operations: NotRequired[int]
    error_message: NotRequired[str | None]


class ListedGroup(TypedDict):
    """One group of ListGroups."""

    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


# --- the consumer and share group protocols (KIP-848, KIP-932) --------------------------------

class HeartbeatTopicPartitions(TypedDict):
    topic_id: uuid.UUID
    partitions: list[int]


class HeartbeatAssignment(TypedDict):
    topic_partitions: list[HeartbeatTopicPartitions]


class GroupHeartbeatResponse(TypedDict):
    """ConsumerGroupHeartbeat's response, and ShareGroupHeartbeat's, which has the same
    fields; ``assignment`` is None when it did not change."""

    throttle_time: int
    error_code: ErrorCode
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval: int
    assignment: HeartbeatAssignment | None


class DescribedTopicPartitions(TypedDict):
    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int]


class DescribedAssignment(TypedDict):
    topic_partitions: list[DescribedTopicPartitions]


class DescribedConsumerGroupMember(TypedDict):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: DescribedAssignment
    target_assignment: DescribedAssignment
    member_type: int
    """0: the member uses the classic protocol; 1: the consumer protocol."""


class DescribedConsumerGroup(TypedDict):
    """One group of ConsumerGroupDescribe."""

    error_code: ErrorCode
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[DescribedConsumerGroupMember]
    authorized_operations: int


class DescribedShareGroupMember(TypedDict):
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    assignment: DescribedAssignment


class DescribedShareGroup(TypedDict):
    """One group of ShareGroupDescribe."""

    error_code: ErrorCode
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[DescribedShareGroupMember]
    authorized_operations: int
