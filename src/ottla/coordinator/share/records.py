"""The records of ``__share_group_state``, byte for byte as Kafka 4.2+ writes them
(``share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json``).

A key is ``int16 record type | GroupId string | TopicId uuid | Partition int32`` (not
flexible): type 0 ShareSnapshot, type 1 ShareUpdate. A value is ``int16 version (0) |
fields``, flexible (every StateBatch too ends with its tagged-field section); a null value
is a tombstone. DeliveryCompleteCount (KIP-1226, Kafka 4.2) is tagged field 0 of both
values, written only when it is not -1, so a value without it is what Kafka 4.1 wrote.
"""

# No ``from __future__ import annotations``: kio introspects the real field types.

import enum
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType

from ottla.coordinator.record_codec import RecordCodec, field_meta, prefix_of
from ottla.coordinator.share.state import (
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    ShareUpdate,
)

VALUE_VERSION = 0


class RecordType(enum.IntEnum):
    SNAPSHOT = 0
    UPDATE = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class _KeyLayout:
    """ShareSnapshotKey and ShareUpdateKey: the same fields, told apart by the type."""

    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 0
    group_id: str = field(metadata=field_meta("string"))
    topic_id: uuid.UUID = field(metadata=field_meta("uuid"))
    partition: int = field(metadata=field_meta("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class _StateBatch:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    first_offset: int = field(metadata=field_meta("int64"))
    last_offset: int = field(metadata=field_meta("int64"))
    delivery_state: int = field(metadata=field_meta("int8"))
    delivery_count: int = field(metadata=field_meta("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class _SnapshotLayout:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    snapshot_epoch: int = field(metadata=field_meta("int32"))
    state_epoch: int = field(metadata=field_meta("int32"))
    leader_epoch: int = field(metadata=field_meta("int32"))
    start_offset: int = field(metadata=field_meta("int64"))
    delivery_complete_count: int = field(metadata=field_meta("int32", tag=0), default=-1)
    create_timestamp: int = field(metadata=field_meta("int64"))
    write_timestamp: int = field(metadata=field_meta("int64"))
    state_batches: tuple[_StateBatch, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _UpdateLayout:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    snapshot_epoch: int = field(metadata=field_meta("int32"))
    leader_epoch: int = field(metadata=field_meta("int32"))
    start_offset: int = field(metadata=field_meta("int64"))
    delivery_complete_count: int = field(metadata=field_meta("int32", tag=0), default=-1)
    state_batches: tuple[_StateBatch, ...] = ()


_LAYOUTS = (_KeyLayout, _SnapshotLayout, _UpdateLayout)
_codec = RecordCodec(_LAYOUTS)


class UnknownShareRecord(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """A ``__share_group_state`` record: a snapshot (value ShareGroupOffset), an update
    (value ShareUpdate), or a tombstone of either type (value None)."""

    key: SharePartitionKey
    record_type: RecordType
    value: ShareGroupOffset | ShareUpdate | None


def snapshot_record(key: SharePartitionKey, state: ShareGroupOffset) -> ShareStateRecord:
    return ShareStateRecord(key, RecordType.SNAPSHOT, state)


def update_record(key: SharePartitionKey, update: ShareUpdate) -> ShareStateRecord:
    return ShareStateRecord(key, RecordType.UPDATE, update)


def tombstone(key: SharePartitionKey) -> ShareStateRecord:
    """Kafka deletes a share-partition's state with a ShareSnapshot tombstone only."""
    return ShareStateRecord(key, RecordType.SNAPSHOT, None)


def _batches(batches: tuple[PersisterStateBatch, ...]) -> tuple[_StateBatch, ...]:
    return tuple(_StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                 for b in batches)


def _from_batches(batches: tuple[_StateBatch, ...]) -> tuple[PersisterStateBatch, ...]:
    return tuple(PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                     b.delivery_count) for b in batches)


def encode_key(record_type: RecordType, key: SharePartitionKey) -> bytes:
    return _codec.prefixed(record_type, _KeyLayout(group_id=key.group_id, topic_id=key.topic_id,
                                             partition=key.partition))


def encode_value(value: ShareGroupOffset | ShareUpdate | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ShareGroupOffset):
        return _codec.prefixed(VALUE_VERSION, _SnapshotLayout(
            snapshot_epoch=value.snapshot_epoch, state_epoch=value.state_epoch,
            leader_epoch=value.leader_epoch, start_offset=value.start_offset,
            delivery_complete_count=value.delivery_complete_count,
            create_timestamp=value.create_timestamp, write_timestamp=value.write_timestamp,
            state_batches=_batches(value.state_batches)))
    return _codec.prefixed(VALUE_VERSION, _UpdateLayout(
        snapshot_epoch=value.snapshot_epoch, leader_epoch=value.leader_epoch,
        start_offset=value.start_offset, delivery_complete_count=value.delivery_complete_count,
        state_batches=_batches(value.state_batches)))


def encode(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    expected = ShareGroupOffset if record.record_type is RecordType.SNAPSHOT else ShareUpdate
    if record.value is not None and not isinstance(record.value, expected):
        raise ValueError(f"A {record.record_type.name} record cannot hold {record.value!r}")
    return encode_key(record.record_type, record.key), encode_value(record.value)


def decode(key: bytes, value: bytes | None) -> ShareStateRecord:
    type_id = prefix_of(key)
    try:
        record_type = RecordType(type_id)
    except ValueError:
        raise UnknownShareRecord(
            f"unknown __share_group_state record type {type_id}") from None
    k = _codec.read(_KeyLayout, key)
    spk = SharePartitionKey(k.group_id, k.topic_id, k.partition)
    if value is None:
        return ShareStateRecord(spk, record_type, None)
    version = prefix_of(value)
    if version != VALUE_VERSION:
        raise UnknownShareRecord(
            f"Share{record_type.name.title()}Value version {version} is not supported")
    if record_type is RecordType.SNAPSHOT:
        s = _codec.read(_SnapshotLayout, value)
        return ShareStateRecord(spk, record_type, ShareGroupOffset(
            s.snapshot_epoch, s.state_epoch, s.leader_epoch, s.start_offset,
            s.delivery_complete_count, s.create_timestamp, s.write_timestamp,
            _from_batches(s.state_batches)))
    u = _codec.read(_UpdateLayout, value)
    return ShareStateRecord(spk, record_type, ShareUpdate(
        u.snapshot_epoch, u.leader_epoch, u.start_offset, u.delivery_complete_count,
        _from_batches(u.state_batches)))
