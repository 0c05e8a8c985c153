"""The records of ``__consumer_offsets``, with Kafka's key and value layouts.

Each log record's key is ``int16 key version | key fields`` and its value is ``int16 value
version | value fields`` (a null value is a tombstone). The key version doubles as the
record type (seed 000): 0/1 offset commit, 2 classic group metadata, 3, 5, 6, 7, 8 the
KIP-848 consumer-group records, 10 to 14 the share-group records (KIP-932). Layouts follow Kafka's
``group-coordinator/src/main/resources/common/message/*.json``.
"""

# No ``from __future__ import annotations``: kio introspects the real field types.

import dataclasses
import io
import uuid
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from kio.serial import entity_writer
from kio.serial.writers import write_unsigned_varint
from kio.static.constants import EntityType

from ottla.coordinator.record_codec import (
    RecordCodec,
    UnknownRecordType,
    field_meta,
    prefix_of,
)


class _Key:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int]


class _Value:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0


# --- offsets ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey(_Key):
    __version__: ClassVar[int] = 1
    group: str = field(metadata=field_meta("string"))
    topic: str = field(metadata=field_meta("string"))
    partition: int = field(metadata=field_meta("int32"))


ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue(_Value):
    """Version 4, the one Kafka 4.4 writes (``offsetCommitValueVersion``: 1 only for a
    commit with its own retention, which Kafka 4 no longer accepts), its first flexible
    version, the topic id a tagged field (written when the commit named it)."""

    __version__: ClassVar[int] = 4
    offset: int = field(metadata=field_meta("int64"))
    leader_epoch: int = field(metadata=field_meta("int32"), default=-1)
    metadata: str = field(metadata=field_meta("string"), default="")
    commit_timestamp: int = field(metadata=field_meta("int64"))
    topic_id: uuid.UUID = field(metadata=field_meta("uuid", tag=0), default=ZERO_UUID)


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV0(_Value):
    """Versions 0 and 2 (the same fields), read from older logs."""

    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata=field_meta("int64"))
    metadata: str = field(metadata=field_meta("string"))
    commit_timestamp: int = field(metadata=field_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV1(_Value):
    """Version 1: with the commit's own expiry, which Ottla reads and ignores (offsets
    expire by ``offsets.retention.minutes``)."""

    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata=field_meta("int64"))
    metadata: str = field(metadata=field_meta("string"))
    commit_timestamp: int = field(metadata=field_meta("int64"))
    expire_timestamp: int = field(metadata=field_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class _OffsetCommitValueV3(_Value):
    """Version 3, the one Ottla wrote before, and Kafka 3.x."""

    __flexible__: ClassVar[bool] = False
    offset: int = field(metadata=field_meta("int64"))
    leader_epoch: int = field(metadata=field_meta("int32"))
    metadata: str = field(metadata=field_meta("string"))
    commit_timestamp: int = field(metadata=field_meta("int64"))


# --- classic groups ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey(_Key):
    __version__: ClassVar[int] = 2
    group: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 3
    member_id: str = field(metadata=field_meta("string"))
    group_instance_id: str | None = field(metadata=field_meta("string"), default=None)
    client_id: str = field(metadata=field_meta("string"))
    client_host: str = field(metadata=field_meta("string"))
    rebalance_timeout: int = field(metadata=field_meta("int32"), default=-1)
    session_timeout: int = field(metadata=field_meta("int32"))
    subscription: bytes = field(metadata=field_meta("bytes"))
    assignment: bytes = field(metadata=field_meta("bytes"))


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue(_Value):
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 3
    protocol_type: str = field(metadata=field_meta("string"))
    generation: int = field(metadata=field_meta("int32"))
    protocol: str | None = field(metadata=field_meta("string"))
    leader: str | None = field(metadata=field_meta("string"))
    current_state_timestamp: int = field(metadata=field_meta("int64"), default=-1)
    members: tuple[MemberMetadata, ...] = ()


# --- consumer groups (KIP-848) ------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataKey(_Key):
    __version__: ClassVar[int] = 3
    group_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataValue(_Value):
    epoch: int = field(metadata=field_meta("int32"))
    metadata_hash: int = field(metadata=field_meta("int64", tag=0), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataKey(_Key):
    __version__: ClassVar[int] = 5
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    name: str = field(metadata=field_meta("string"))
    metadata: bytes = field(metadata=field_meta("bytes"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """What a classic-protocol member of a consumer group joined with (migration)."""

    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    session_timeout_ms: int = field(metadata=field_meta("int32"))
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue(_Value):
    instance_id: str | None = field(metadata=field_meta("string"), default=None)
    rack_id: str | None = field(metadata=field_meta("string"), default=None)
    client_id: str = field(metadata=field_meta("string"))
    client_host: str = field(metadata=field_meta("string"))
    subscribed_topic_names: tuple[str, ...] = field(metadata=field_meta("string"), default=())
    subscribed_topic_regex: str | None = field(metadata=field_meta("string"), default=None)
    rebalance_timeout_ms: int = field(metadata=field_meta("int32"), default=-1)
    server_assignor: str | None = field(metadata=field_meta("string"), default=None)
    classic_member_metadata: ClassicMemberMetadata | None = field(
        metadata={"tag": 0}, default=None)
    """Tagged and nullable; set only for a member that uses the classic protocol."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataKey(_Key):
    __version__: ClassVar[int] = 6
    group_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue(_Value):
    assignment_epoch: int = field(metadata=field_meta("int32"))
    assignment_timestamp: int = field(metadata=field_meta("int64", tag=0), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    topic_id: uuid.UUID = field(metadata=field_meta("uuid"))
    partitions: tuple[int, ...] = field(metadata=field_meta("int32"), default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberKey(_Key):
    __version__: ClassVar[int] = 7
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberValue(_Value):
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentKey(_Key):
    __version__: ClassVar[int] = 8
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue(_Value):
    member_epoch: int = field(metadata=field_meta("int32"))
    previous_member_epoch: int = field(metadata=field_meta("int32"))
    state: int = field(metadata=field_meta("int8"))
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


# --- share groups (KIP-932) ---------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataKey(_Key):
    __version__: ClassVar[int] = 10
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataValue(_Value):
    rack_id: str | None = field(metadata=field_meta("string"), default=None)
    client_id: str = field(metadata=field_meta("string"))
    client_host: str = field(metadata=field_meta("string"))
    subscribed_topic_names: tuple[str, ...] = field(metadata=field_meta("string"), default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataKey(_Key):
    __version__: ClassVar[int] = 11
    group_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataValue(_Value):
    epoch: int = field(metadata=field_meta("int32"))
    metadata_hash: int = field(metadata=field_meta("int64", tag=0), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataKey(_Key):
    __version__: ClassVar[int] = 12
    group_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataValue(_Value):
    assignment_epoch: int = field(metadata=field_meta("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberKey(_Key):
    __version__: ClassVar[int] = 13
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberValue(_Value):
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentKey(_Key):
    __version__: ClassVar[int] = 14
    group_id: str = field(metadata=field_meta("string"))
    member_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue(_Value):
    member_epoch: int = field(metadata=field_meta("int32"))
    previous_member_epoch: int = field(metadata=field_meta("int32"))
    state: int = field(metadata=field_meta("int8"))
    assigned_partitions: tuple[TopicPartitions, ...] = ()


# --- framing ------------------------------------------------------------------------------

KEY_TYPES: dict[int, type] = {0: OffsetCommitKey, 1: OffsetCommitKey, 2: GroupMetadataKey,
                              3: ConsumerGroupMetadataKey, 5: ConsumerGroupMemberMetadataKey,
                              6: ConsumerGroupTargetAssignmentMetadataKey,
                              7: ConsumerGroupTargetAssignmentMemberKey,
                              8: ConsumerGroupCurrentMemberAssignmentKey,
                              10: ShareGroupMemberMetadataKey, 11: ShareGroupMetadataKey,
                              12: ShareGroupTargetAssignmentMetadataKey,
                              13: ShareGroupTargetAssignmentMemberKey,
                              14: ShareGroupCurrentMemberAssignmentKey}
VALUE_TYPES: dict[type, type] = {
    OffsetCommitKey: OffsetCommitValue, GroupMetadataKey: GroupMetadataValue,
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey: ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey: ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataKey: ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberKey: ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentKey: ShareGroupCurrentMemberAssignmentValue,
}
OLDER_VALUES: dict[tuple[type, int], type] = {
    (OffsetCommitValue, 0): _OffsetCommitValueV0, (OffsetCommitValue, 1): _OffsetCommitValueV1,
    (OffsetCommitValue, 2): _OffsetCommitValueV0, (OffsetCommitValue, 3): _OffsetCommitValueV3,
}
"""The older versions of a value Kafka's loader reads too (each read into the current
type, the fields it lacks at their defaults)."""
_ALL = set(KEY_TYPES.values()) | set(VALUE_TYPES.values()) | set(OLDER_VALUES.values())


class UnknownRecord(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """A key and its value; ``value is None`` is a tombstone."""

    key: Any
    value: Any | None


_member_metadata_writer = entity_writer(ConsumerGroupMemberMetadataValue)
_classic_member_writer = entity_writer(ClassicMemberMetadata)


def _write_member_metadata(buf: IO[bytes], value: ConsumerGroupMemberMetadataValue) -> None:
    """kio leaves out the presence byte Kafka writes before a nullable struct in a tagged
    field (KIP-893), so a value with the one tagged field set is written here."""
    classic = value.classic_member_metadata
    if classic is None:
        _member_metadata_writer(buf, value)
        return
    body = io.BytesIO()
    _member_metadata_writer(body, dataclasses.replace(value, classic_member_metadata=None))
    untagged = body.getvalue()
    assert untagged[-1] == 0  # no tagged fields
    struct_bytes = io.BytesIO()
    _classic_member_writer(struct_bytes, classic)
    buf.write(untagged[:-1])
    write_unsigned_varint(buf, 1)  # one tagged field
    write_unsigned_varint(buf, 0)  # tag 0: ClassicMemberMetadata
    write_unsigned_varint(buf, len(struct_bytes.getvalue()) + 1)
    buf.write(b"\x01")  # present
    buf.write(struct_bytes.getvalue())


_codec = RecordCodec(_ALL, writers={ConsumerGroupMemberMetadataValue: _write_member_metadata})


def encode(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    key = _codec.prefixed(type(record.key).__version__, record.key)
    value = None if record.value is None else \
        _codec.prefixed(type(record.value).__version__, record.value)
    return key, value


def decode(key: bytes, value: bytes | None) -> CoordinatorRecord:
    key_version = prefix_of(key)
    key_cls = KEY_TYPES.get(key_version)
    if key_cls is None:
        raise UnknownRecordType(key_version)
    decoded_key = _codec.read(key_cls, key)
    if value is None:
        return CoordinatorRecord(decoded_key, None)
    value_cls = VALUE_TYPES[key_cls]
    value_version = prefix_of(value)
    if value_version == value_cls.__version__:
        return CoordinatorRecord(decoded_key, _codec.read(value_cls, value))
    older = OLDER_VALUES.get((value_cls, value_version))
    if older is None:
        raise UnknownRecord(f"{value_cls.__name__} version {value_version} is not supported")
    fields = dataclasses.asdict(_codec.read(older, value))
    known = {f.name for f in dataclasses.fields(value_cls)}
    return CoordinatorRecord(decoded_key, value_cls(**{
        name: value for name, value in fields.items() if name in known}))
