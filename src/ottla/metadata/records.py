"""The record types of the ``__cluster_metadata`` log, with Kafka's field layouts.

``kio`` ships the RPC schemas but not these internal ones, so they are declared here in
``kio``'s dataclass form (which lets ``kio``'s reader and writer handle them) following
``metadata/src/main/resources/common/metadata/*.json`` in Apache Kafka. Each record is
stored as the value of a log record, framed as::

    frame version (uvarint, 0) | record type = apiKey (uvarint) | version (uvarint) | data

Each type is written in one version (``__version__``, the newest Kafka writes at the
metadata.version Ottla runs) and read in every version from ``__min_version__`` up, the
versions whose layout differs only in tagged fields; an older layout is read through its
own class (``_LEGACY``) and given back as the current type.
"""

# No ``from __future__ import annotations``: kio introspects the real field types.

import io
import uuid
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import f64

from ottla.protocol.varint import encode_unsigned_varint, read_unsigned_varint

FRAME_VERSION = 1
"""Kafka's ``AbstractApiMessageSerde.DEFAULT_FRAME_VERSION``: what every record is framed
with, so Kafka's tools (kafka-dump-log, kafka-metadata-shell) read Ottla's metadata log."""
READ_FRAME_VERSIONS = frozenset({0, FRAME_VERSION})
"""Frame versions read back: Ottla wrote 0 before it framed as Kafka does."""


def _meta(kafka_type: str, tag: int | None = None) -> dict[str, Any]:
    return {"kafka_type": kafka_type} if tag is None else {"kafka_type": kafka_type, "tag": tag}


class _Record:
    __type__: ClassVar = EntityType.data
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    """The version written."""
    __min_version__: ClassVar[int] = 0
    """The oldest version read with this class's layout."""
    __api_key__: ClassVar[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_meta("string"))
    host: str = field(metadata=_meta("string"))
    port: int = field(metadata=_meta("uint16"))
    security_protocol: int = field(metadata=_meta("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    name: str = field(metadata=_meta("string"))
    min_supported_version: int = field(metadata=_meta("int16"))
    max_supported_version: int = field(metadata=_meta("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord(_Record):
    """Version 1 adds InControlledShutdown, 2 IsMigratingZkBroker, 3 LogDirs (KIP-858,
    written from metadata.version 3.7-IV2), 4 CordonedLogDirs (KIP-1066, written from
    4.3-IV0; null until the broker's heartbeats say). Below 4.3-IV0 it is written as
    ``RegisterBrokerRecordV3``, so that a Kafka release that knows only v3 reads it."""
    __api_key__: ClassVar[int] = 0
    __version__: ClassVar[int] = 4
    __min_version__: ClassVar[int] = 2
    broker_id: int = field(metadata=_meta("int32"))
    is_migrating_zk_broker: bool = field(metadata=_meta("bool"), default=False)
    incarnation_id: uuid.UUID = field(metadata=_meta("uuid"))
    broker_epoch: int = field(metadata=_meta("int64"))
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = field(metadata=_meta("string"), default=None)
    fenced: bool = field(metadata=_meta("bool"), default=True)
    in_controlled_shutdown: bool = field(metadata=_meta("bool"), default=False)
    log_dirs: tuple[uuid.UUID, ...] = field(metadata=_meta("uuid", tag=0), default=())
    """The ids of the broker's log dirs (all of them, online when it registers)."""
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = field(metadata=_meta("uuid", tag=1),
                                                            default=None)

    @staticmethod
    def at(metadata_level: int) -> type["RegisterBrokerRecord"]:
        """The class that writes this record as Kafka does at ``metadata_level`` (its
        ``registerBrokerRecordVersion``; v3 for every level Ottla writes below 4.3-IV0)."""
        return RegisterBrokerRecord if metadata_level >= 30 else RegisterBrokerRecordV3


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecordV3(RegisterBrokerRecord):
    """A RegisterBrokerRecord written in version 3 (no cordoned log dirs): the same
    record, replayed as one."""
    __version__: ClassVar[int] = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegisterBrokerRecordV1(_Record):
    """RegisterBrokerRecord versions 0 (without ``in_controlled_shutdown``) and 1."""
    __api_key__: ClassVar[int] = 0
    __version__: ClassVar[int] = 1
    broker_id: int = field(metadata=_meta("int32"))
    incarnation_id: uuid.UUID = field(metadata=_meta("uuid"))
    broker_epoch: int = field(metadata=_meta("int64"))
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = field(metadata=_meta("string"), default=None)
    fenced: bool = field(metadata=_meta("bool"), default=True)
    in_controlled_shutdown: bool = field(metadata=_meta("bool"), default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegisterBrokerRecordV0(_Record):
    __api_key__: ClassVar[int] = 0
    broker_id: int = field(metadata=_meta("int32"))
    incarnation_id: uuid.UUID = field(metadata=_meta("uuid"))
    broker_epoch: int = field(metadata=_meta("int64"))
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = field(metadata=_meta("string"), default=None)
    fenced: bool = field(metadata=_meta("bool"), default=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterControllerRecord(_Record):
    """A controller's registration (KIP-919, from metadata.version 3.7-IV0): where it
    listens and which features it supports. Its endpoints and features have the layout
    of a broker's (ControllerEndpoint, ControllerFeature)."""
    __api_key__: ClassVar[int] = 27
    controller_id: int = field(metadata=_meta("int32"))
    incarnation_id: uuid.UUID = field(metadata=_meta("uuid"))
    zk_migration_ready: bool = field(metadata=_meta("bool"), default=False)
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterControllerRecord(_Record):
    """A controller's registration removed (KIP-1220, from metadata.version 4.4-IV2)."""
    __api_key__: ClassVar[int] = 29
    controller_id: int = field(metadata=_meta("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord(_Record):
    __api_key__: ClassVar[int] = 1
    broker_id: int = field(metadata=_meta("int32"))
    broker_epoch: int = field(metadata=_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord(_Record):
    __api_key__: ClassVar[int] = 2
    name: str = field(metadata=_meta("string"))
    topic_id: uuid.UUID = field(metadata=_meta("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord(_Record):
    """Version 1 adds Directories (KIP-858), 2 the Eligible Leader Replicas (KIP-966)."""
    __api_key__: ClassVar[int] = 3
    __version__: ClassVar[int] = 2
    __min_version__: ClassVar[int] = 1
    partition_id: int = field(metadata=_meta("int32"), default=-1)
    topic_id: uuid.UUID = field(metadata=_meta("uuid"))
    replicas: tuple[int, ...] = field(metadata=_meta("int32"))
    isr: tuple[int, ...] = field(metadata=_meta("int32"))
    removing_replicas: tuple[int, ...] = field(metadata=_meta("int32"), default=())
    adding_replicas: tuple[int, ...] = field(metadata=_meta("int32"), default=())
    leader: int = field(metadata=_meta("int32"), default=-1)
    leader_recovery_state: int = field(metadata=_meta("int8", tag=0), default=0)
    leader_epoch: int = field(metadata=_meta("int32"), default=-1)
    partition_epoch: int = field(metadata=_meta("int32"), default=-1)
    directories: tuple[uuid.UUID, ...] = field(metadata=_meta("uuid"), default=())
    """The log dir of each replica, in the order of ``replicas`` (``directory_id``'s
    reserved ids where it is not known)."""
    eligible_leader_replicas: tuple[int, ...] | None = field(
        metadata=_meta("int32", tag=1), default=None)
    """KIP-966: replicas that left the ISR while it was below min.insync.replicas."""
    last_known_elr: tuple[int, ...] | None = field(metadata=_meta("int32", tag=2),
                                                   default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartitionRecordV0(_Record):
    """PartitionRecord version 0, without Directories (as older Ottla wrote it, with the
    ELR's tagged fields)."""
    __api_key__: ClassVar[int] = 3
    partition_id: int = field(metadata=_meta("int32"), default=-1)
    topic_id: uuid.UUID = field(metadata=_meta("uuid"))
    replicas: tuple[int, ...] = field(metadata=_meta("int32"))
    isr: tuple[int, ...] = field(metadata=_meta("int32"))
    removing_replicas: tuple[int, ...] = field(metadata=_meta("int32"), default=())
    adding_replicas: tuple[int, ...] = field(metadata=_meta("int32"), default=())
    leader: int = field(metadata=_meta("int32"), default=-1)
    leader_recovery_state: int = field(metadata=_meta("int8", tag=0), default=0)
    leader_epoch: int = field(metadata=_meta("int32"), default=-1)
    partition_epoch: int = field(metadata=_meta("int32"), default=-1)
    eligible_leader_replicas: tuple[int, ...] | None = field(
        metadata=_meta("int32", tag=1), default=None)
    last_known_elr: tuple[int, ...] | None = field(metadata=_meta("int32", tag=2),
                                                   default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord(_Record):
    __api_key__: ClassVar[int] = 4
    resource_type: int = field(metadata=_meta("int8"))
    resource_name: str = field(metadata=_meta("string"))
    name: str = field(metadata=_meta("string"))
    value: str | None = field(metadata=_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord(_Record):
    """Version 1 adds Directories (KIP-858), 2 the Eligible Leader Replicas (KIP-966):
    tagged fields all, so every version reads with this class."""
    __api_key__: ClassVar[int] = 5
    __version__: ClassVar[int] = 2
    partition_id: int = field(metadata=_meta("int32"), default=-1)
    topic_id: uuid.UUID = field(metadata=_meta("uuid"))
    isr: tuple[int, ...] | None = field(metadata=_meta("int32", tag=0), default=None)
    leader: int = field(metadata=_meta("int32", tag=1), default=-2)
    replicas: tuple[int, ...] | None = field(metadata=_meta("int32", tag=2), default=None)
    removing_replicas: tuple[int, ...] | None = field(metadata=_meta("int32", tag=3),
                                                      default=None)
    adding_replicas: tuple[int, ...] | None = field(metadata=_meta("int32", tag=4), default=None)
    leader_recovery_state: int = field(metadata=_meta("int8", tag=5), default=-1)
    eligible_leader_replicas: tuple[int, ...] | None = field(
        metadata=_meta("int32", tag=6), default=None)
    last_known_elr: tuple[int, ...] | None = field(metadata=_meta("int32", tag=7),
                                                   default=None)
    directories: tuple[uuid.UUID, ...] | None = field(metadata=_meta("uuid", tag=8),
                                                      default=None)
    """The log dir of each replica, in the order of the replicas, when it changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FenceBrokerRecord(_Record):
    __api_key__: ClassVar[int] = 7
    id: int = field(metadata=_meta("int32"))
    epoch: int = field(metadata=_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class UnfenceBrokerRecord(_Record):
    __api_key__: ClassVar[int] = 8
    id: int = field(metadata=_meta("int32"))
    epoch: int = field(metadata=_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord(_Record):
    __api_key__: ClassVar[int] = 9
    topic_id: uuid.UUID = field(metadata=_meta("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord(_Record):
    """A change of a registered broker: fencing (-1 unfenced, 0 no change, 1 fenced),
    controlled shutdown (1), its online log dirs (KIP-858: the dirs it registered
    with but those its heartbeats reported offline; empty for no change), or its
    cordoned ones (KIP-1066, null for no change). Version 1 adds InControlledShutdown, 2
    LogDirs, 3 CordonedLogDirs; all tagged, and Kafka writes the oldest version that has
    the field a change sets (``write_version``)."""
    __api_key__: ClassVar[int] = 17
    __version__: ClassVar[int] = 3
    broker_id: int = field(metadata=_meta("int32"))
    broker_epoch: int = field(metadata=_meta("int64"))
    fenced: int = field(metadata=_meta("int8", tag=0), default=0)
    in_controlled_shutdown: int = field(metadata=_meta("int8", tag=1), default=0)
    log_dirs: tuple[uuid.UUID, ...] = field(metadata=_meta("uuid", tag=2), default=())
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = field(metadata=_meta("uuid", tag=3),
                                                            default=None)

    def write_version(self) -> int:
        """Kafka's versions: 3 for cordoned dirs, 2 for log dirs, 1 for a controlled
        shutdown, 0 for fencing."""
        if self.cordoned_log_dirs is not None:
            return 3
        if self.log_dirs:
            return 2
        return 1 if self.in_controlled_shutdown else 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord(_Record):
    """A user's SCRAM credential for one mechanism (KIP-554): what the password gives,
    never the password. A later record for the same user and mechanism replaces it."""
    __api_key__: ClassVar[int] = 11
    name: str = field(metadata=_meta("string"))
    mechanism: int = field(metadata=_meta("int8"))
    """``ScramMechanism``: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""
    salt: bytes = field(metadata=_meta("bytes"))
    stored_key: bytes = field(metadata=_meta("bytes"))
    server_key: bytes = field(metadata=_meta("bytes"))
    iterations: int = field(metadata=_meta("int32"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaEntityData:
    __type__: ClassVar = EntityType.nested
    __flexible__: ClassVar[bool] = True
    __version__: ClassVar[int] = 0
    entity_type: str = field(metadata=_meta("string"))
    """``user``, ``client-id`` or ``ip``."""
    entity_name: str | None = field(metadata=_meta("string"))
    """None: the default entity of that type."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord(_Record):
    """One quota key of one entity (KIP-546): set to ``value``, or removed. An entity is
    a user, a client id, both, or an IP address, each named or the default."""
    __api_key__: ClassVar[int] = 14
    entity: tuple[ClientQuotaEntityData, ...] = ()
    key: str = field(metadata=_meta("string"))
    value: f64 = field(metadata=_meta("float64"), default=f64(0.0))
    """Ignored when ``remove``."""
    remove: bool = field(metadata=_meta("bool"), default=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationTokenRecord(_Record):
    """A delegation token (KIP-48), issued or renewed: a later record for the same id
    replaces it. Principals are written ``type:name``; the HMAC is never stored (every
    node derives it from the shared secret key)."""
    __api_key__: ClassVar[int] = 10
    owner: str = field(metadata=_meta("string"))
    requester: str = field(metadata=_meta("string"))
    renewers: tuple[str, ...] = field(metadata=_meta("string"), default=())
    issue_timestamp: int = field(metadata=_meta("int64"))
    max_timestamp: int = field(metadata=_meta("int64"))
    expiration_timestamp: int = field(metadata=_meta("int64"))
    token_id: str = field(metadata=_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveDelegationTokenRecord(_Record):
    """The token ``token_id`` is gone: expired by its owner or renewer, or swept."""
    __api_key__: ClassVar[int] = 26
    token_id: str = field(metadata=_meta("string"))


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord(_Record):
    __api_key__: ClassVar[int] = 12
    name: str = field(metadata=_meta("string"))
    feature_level: int = field(metadata=_meta("int16"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsRecord(_Record):
    __api_key__: ClassVar[int] = 15
    broker_id: int = field(metadata=_meta("int32"))
    broker_epoch: int = field(metadata=_meta("int64"), default=-1)
    next_producer_id: int = field(metadata=_meta("int64"))


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord(_Record):
    """One ACL (KRaft's StandardAcl), under the id a RemoveAccessControlEntryRecord
    names. The codes are Kafka's ResourceType, PatternType, AclOperation and
    AclPermissionType (``ottla.security.acl``)."""
    __api_key__: ClassVar[int] = 18
    id: uuid.UUID = field(metadata=_meta("uuid"))
    resource_type: int = field(metadata=_meta("int8"))
    resource_name: str = field(metadata=_meta("string"))
    pattern_type: int = field(metadata=_meta("int8"))
    principal: str = field(metadata=_meta("string"))
    host: str = field(metadata=_meta("string"))
    operation: int = field(metadata=_meta("int8"))
    permission_type: int = field(metadata=_meta("int8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord(_Record):
    """The ACL stored under ``id`` is gone."""
    __api_key__: ClassVar[int] = 19
    id: uuid.UUID = field(metadata=_meta("uuid"))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoOpRecord(_Record):
    __api_key__: ClassVar[int] = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord(_Record):
    """A user's SCRAM credential for one mechanism is gone."""
    __api_key__: ClassVar[int] = 22
    name: str = field(metadata=_meta("string"))
    mechanism: int = field(metadata=_meta("int8"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginTransactionRecord(_Record):
    __api_key__: ClassVar[int] = 23
    name: str | None = field(metadata=_meta("string", tag=0), default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTransactionRecord(_Record):
    __api_key__: ClassVar[int] = 24


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortTransactionRecord(_Record):
    __api_key__: ClassVar[int] = 25
    reason: str | None = field(metadata=_meta("string", tag=0), default=None)


RECORD_TYPES: dict[int, type] = {cls.__api_key__: cls for cls in (
    RegisterBrokerRecord, UnregisterBrokerRecord, TopicRecord, PartitionRecord, ConfigRecord,
    PartitionChangeRecord, FenceBrokerRecord, UnfenceBrokerRecord, RemoveTopicRecord,
    BrokerRegistrationChangeRecord, UserScramCredentialRecord, FeatureLevelRecord,
    ClientQuotaRecord, ProducerIdsRecord, AccessControlEntryRecord,
    RemoveAccessControlEntryRecord, NoOpRecord, RemoveUserScramCredentialRecord,
    BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord,
    DelegationTokenRecord, RemoveDelegationTokenRecord, RegisterControllerRecord,
    UnregisterControllerRecord)}

_LEGACY: dict[tuple[int, int], type] = {
    (0, 0): _RegisterBrokerRecordV0, (0, 1): _RegisterBrokerRecordV1,
    (3, 0): _PartitionRecordV0}
"""Older layouts of a record type, by (api key, version): read, then made the current
type (the fields they lack take their defaults)."""

_writers = {cls: entity_writer(cls) for cls in (*RECORD_TYPES.values(), RegisterBrokerRecordV3)}
_readers = {cls: entity_reader(cls) for cls in (*RECORD_TYPES.values(), *_LEGACY.values())}


class UnknownMetadataRecord(ValueError):
    pass


def encode(record: Any) -> bytes:
    """A metadata record as the value bytes of a log record."""
    cls = type(record)
    buf = io.BytesIO()
    version = record.write_version() if hasattr(record, "write_version") else cls.__version__
    buf.write(encode_unsigned_varint(FRAME_VERSION) + encode_unsigned_varint(cls.__api_key__)
              + encode_unsigned_varint(version))
    _writers[cls](buf, record)
    return buf.getvalue()


def decode(value: bytes) -> Any:
    frame, pos = read_unsigned_varint(value, 0)
    api_key, pos = read_unsigned_varint(value, pos)
    version, pos = read_unsigned_varint(value, pos)
    cls = RECORD_TYPES.get(api_key)
    if frame not in READ_FRAME_VERSIONS or cls is None:
        raise UnknownMetadataRecord(f"metadata record type {api_key} v{version}")
    if cls.__min_version__ <= version <= cls.__version__:
        record, _ = _readers[cls](value, pos)
        return record
    legacy = _LEGACY.get((api_key, version))
    if legacy is None:
        raise UnknownMetadataRecord(f"metadata record type {api_key} v{version}")
    old, _ = _readers[legacy](value, pos)
    return cls(**{f.name: getattr(old, f.name) for f in fields(old)})
