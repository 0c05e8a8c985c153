"""The records of ``__transaction_state``, with Kafka's layouts
(``transaction-coordinator/src/main/resources/common/message/TransactionLog*.json``).

The key is ``int16 version (0) | string transactional id``; the value is ``int16 version |
fields``, or null (a tombstone: the transactional id expired). Value version 0 is not
flexible; version 1 (written once ``transaction.version`` is at least 1) is, and carries
the previous and next producer ids and the client's transaction version as tagged
fields (KIP-890). A transaction in state Empty stores a null partition list.
"""

# No ``from __future__ import annotations``: kio introspects the real field types.

from dataclasses import dataclass, field
from typing import ClassVar

from kio.static.constants import EntityType

from ottla.coordinator.record_codec import RecordCodec, field_meta, prefix_of

KEY_VERSION = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogKey:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 0
    transactional_id: str = field(metadata=field_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsV0:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 0
    topic: str = field(metadata=field_meta("string"))
    partition_ids: tuple[int, ...] = field(metadata=field_meta("int32"), default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsV1:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 1
    topic: str = field(metadata=field_meta("string"))
    partition_ids: tuple[int, ...] = field(metadata=field_meta("int32"), default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValueV0:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = False
    __version__: ClassVar[int] = 0
    producer_id: int = field(metadata=field_meta("int64"))
    producer_epoch: int = field(metadata=field_meta("int16"))
    transaction_timeout_ms: int = field(metadata=field_meta("int32"))
    transaction_status: int = field(metadata=field_meta("int8"))
    transaction_partitions: tuple[PartitionsV0, ...] | None = None
    transaction_last_update_timestamp_ms: int = field(metadata=field_meta("int64"))
    transaction_start_timestamp_ms: int = field(metadata=field_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValueV1:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 1
    producer_id: int = field(metadata=field_meta("int64"))
    previous_producer_id: int = field(metadata=field_meta("int64", tag=0), default=-1)
    next_producer_id: int = field(metadata=field_meta("int64", tag=1), default=-1)
    producer_epoch: int = field(metadata=field_meta("int16"))
    transaction_timeout_ms: int = field(metadata=field_meta("int32"))
    transaction_status: int = field(metadata=field_meta("int8"))
    transaction_partitions: tuple[PartitionsV1, ...] | None = None
    transaction_last_update_timestamp_ms: int = field(metadata=field_meta("int64"))
    transaction_start_timestamp_ms: int = field(metadata=field_meta("int64"))
    client_transaction_version: int = field(metadata=field_meta("int16", tag=2), default=0)


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """A value of either version, as the coordinator uses it."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    partitions: dict[str, tuple[int, ...]] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


_codec = RecordCodec((TransactionLogKey, TransactionLogValueV0, TransactionLogValueV1))


class UnknownTransactionRecord(ValueError):
    pass


def encode_key(transactional_id: str) -> bytes:
    return _codec.prefixed(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def encode_value(value: TransactionLogValue | None, version: int) -> bytes | None:
    """``value`` in value ``version`` (0 or 1, Kafka's ``transactionLogValueVersion``);
    None stays a tombstone."""
    if value is None:
        return None
    parts = None if value.partitions is None else sorted(value.partitions.items())
    if version == 0:
        return _codec.prefixed(0, TransactionLogValueV0(
            producer_id=value.producer_id, producer_epoch=value.producer_epoch,
            transaction_timeout_ms=value.transaction_timeout_ms,
            transaction_status=value.transaction_status,
            transaction_partitions=None if parts is None else tuple(
                PartitionsV0(topic=t, partition_ids=tuple(ps)) for t, ps in parts),
            transaction_last_update_timestamp_ms=value.last_update_timestamp_ms,
            transaction_start_timestamp_ms=value.start_timestamp_ms))
    if version == 1:
        return _codec.prefixed(1, TransactionLogValueV1(
            producer_id=value.producer_id, previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id, producer_epoch=value.producer_epoch,
            transaction_timeout_ms=value.transaction_timeout_ms,
            transaction_status=value.transaction_status,
            transaction_partitions=None if parts is None else tuple(
                PartitionsV1(topic=t, partition_ids=tuple(ps)) for t, ps in parts),
            transaction_last_update_timestamp_ms=value.last_update_timestamp_ms,
            transaction_start_timestamp_ms=value.start_timestamp_ms,
            client_transaction_version=value.client_transaction_version))
    raise ValueError(f"TransactionLogValue has no version {version}")


def decode_key(key: bytes) -> str:
    version = prefix_of(key)
    if version != KEY_VERSION:
        raise UnknownTransactionRecord(f"unknown __transaction_state key version {version}")
    decoded = _codec.read(TransactionLogKey, key)
    return str(decoded.transactional_id)


def decode_value(value: bytes | None) -> TransactionLogValue | None:
    if value is None:
        return None
    version = prefix_of(value)
    if version == 0:
        v0 = _codec.read(TransactionLogValueV0, value)
        previous, following, client_version = -1, -1, 0
        partitions = v0.transaction_partitions
        fields = v0
    elif version == 1:
        v1 = _codec.read(TransactionLogValueV1, value)
        previous, following = v1.previous_producer_id, v1.next_producer_id
        client_version = v1.client_transaction_version
        partitions = v1.transaction_partitions
        fields = v1
    else:
        raise UnknownTransactionRecord(f"TransactionLogValue version {version} is not supported")
    return TransactionLogValue(
        producer_id=fields.producer_id, producer_epoch=fields.producer_epoch,
        transaction_timeout_ms=fields.transaction_timeout_ms,
        transaction_status=fields.transaction_status,
        partitions=None if partitions is None else {
            p.topic: tuple(p.partition_ids) for p in partitions},
        last_update_timestamp_ms=fields.transaction_last_update_timestamp_ms,
        start_timestamp_ms=fields.transaction_start_timestamp_ms,
        previous_producer_id=previous, next_producer_id=following,
        client_transaction_version=client_version)
