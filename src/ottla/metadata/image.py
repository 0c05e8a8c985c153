"""The metadata image: cluster state rebuilt by replaying ``__cluster_metadata`` records.

Both the controller (at write time) and the broker (at commit time) hold one and feed it
the same records through ``replay``; nothing else mutates it. That is the "one replay
path" of the design: restarting a node is replaying its log, and a snapshot is the image
written back as records (``to_records``).

Replay never changes a stored object in place: a changed partition, broker or config set
is a new object put under its key. So the controller's image can keep its maps on the
timeline (``registry``): each map then remembers the values it had at every snapshot
epoch, and renouncing leadership reverts the uncommitted records wholesale. A broker's
image uses plain dicts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from kio.static.primitive import f64

from ottla.common.features import METADATA_VERSION, METADATA_VERSION_LEVEL
from ottla.metadata import directory_id
from ottla.metadata import records as r
from ottla.metadata.client_quotas import QuotaEntity, entity_sort_key, quota_entity
from ottla.security.acl import AclBinding, AclBindingFilter
from ottla.security.delegation_token import TokenInformation, principal
from ottla.security.scram import ScramCredential, ScramMechanism
from ottla.timeline import SnapshotRegistry, TimelineHashMap

NO_LEADER = -1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids, as used by DescribeConfigs and ConfigRecord."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    elr: list[int] = field(default_factory=list)
    """Eligible leader replicas (KIP-966)."""
    last_known_elr: list[int] = field(default_factory=list)
    directories: list[uuid.UUID] = field(default_factory=list)
    """The log dir of each replica, in the order of ``replicas`` (KIP-858); empty when
    none is known (``directory_id.normalized``)."""

    def directory(self, replica: int) -> uuid.UUID:
        """The log dir of ``replica``'s copy (Kafka's ``PartitionRegistration.directory``):
        ``MIGRATING`` where no directory is known."""
        if not self.directories:
            return directory_id.MIGRATING
        return self.directories[self.replicas.index(replica)]

    def directory_list(self) -> list[uuid.UUID]:
        """Every replica's directory, as a record carries them."""
        return list(self.directories) or [directory_id.MIGRATING] * len(self.replicas)


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: MutableMapping[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: dict[str, Endpoint]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    directories: tuple[uuid.UUID, ...] = ()
    """The broker's online log dirs, sorted (KIP-858): those it registered with, less
    those its heartbeats reported offline. Empty for a broker that registered none."""
    features: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Supported (min, max) levels by feature name, as it registered: a feature it did
    not name it supports only at level 0 (what UpdateFeatures checks)."""
    cordoned_directories: tuple[uuid.UUID, ...] | None = None
    """Its cordoned log dirs (KIP-1066, 4.3-IV0 and later: ``cordoned.log.dirs``), None
    until its heartbeats report them. New replicas go to its other dirs."""

    @property
    def has_uncordoned_dirs(self) -> bool:
        """Whether new replicas may be placed on this broker (Kafka's
        ``BrokerRegistration.hasUncordonedDirs``): it registered no dirs, has reported no
        cordoned ones, or has a dir that is not cordoned."""
        if not self.directories or self.cordoned_directories is None:
            return True
        return bool(set(self.directories) - set(self.cordoned_directories))

    def has_online_dir(self, directory: uuid.UUID) -> bool:
        """Whether a replica in ``directory`` on this broker is online (Kafka's
        ``BrokerRegistration.hasOnlineDir``)."""
        return directory_id.is_online(directory, self.directories)

    @property
    def default_dir(self) -> uuid.UUID:
        """Where the controller can place this broker's new replicas itself (Kafka's
        ``ClusterControlManager.defaultDir``): its only online log dir; ``UNASSIGNED``
        among several (the broker says where it put each); ``MIGRATING`` when it
        registered none."""
        if not self.directories:
            return directory_id.MIGRATING
        return self.directories[0] if len(self.directories) == 1 else directory_id.UNASSIGNED


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """A controller as it registered (KIP-919, Kafka's ``ControllerRegistration``): where
    it listens, what it supports; what DescribeCluster on a controller listener lists."""
    controller_id: int
    incarnation_id: uuid.UUID
    zk_migration_ready: bool
    endpoints: dict[str, Endpoint]
    """By listener name, in the order the controller gave them."""
    features: dict[str, tuple[int, int]]
    """Supported (min, max) levels by feature name."""


def _features(features: tuple[r.BrokerFeature, ...]) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_supported_version, f.max_supported_version) for f in features}


def _feature_records(features: dict[str, tuple[int, int]]) -> tuple[r.BrokerFeature, ...]:
    return tuple(r.BrokerFeature(name=name, min_supported_version=low,
                                 max_supported_version=high)
                 for name, (low, high) in features.items())


def _dirs(log_dirs: tuple[uuid.UUID | None, ...]) -> tuple[uuid.UUID, ...]:
    """A broker's log dirs as its registration keeps them: sorted, as Kafka's."""
    return tuple(sorted(d for d in log_dirs if d is not None))


class MetadataImage:
    def __init__(self, registry: SnapshotRegistry | None = None) -> None:
        self.registry = registry
        self.topics_by_name: MutableMapping[str, TopicImage] = self._map()
        self.topics_by_id: MutableMapping[uuid.UUID, TopicImage] = self._map()
        self.configs: MutableMapping[tuple[int, str], dict[str, str]] = self._map()
        self.brokers: MutableMapping[int, BrokerRegistration] = self._map()
        self.controllers: MutableMapping[int, ControllerRegistration] = self._map()
        """Controller registrations (KIP-919) by controller id."""
        self.features: MutableMapping[str, int] = self._map()
        self.scram: MutableMapping[tuple[int, str], ScramCredential] = self._map()
        """SCRAM credentials (KIP-554) by (mechanism number, user name); read them with
        ``scram_credential`` and ``scram_users``."""
        self.acls: MutableMapping[uuid.UUID, AclBinding] = self._map()
        """ACLs (KRaft's StandardAcls) by the id of their AccessControlEntryRecord, each
        carrying that id; read them with ``acl_bindings``, find one with ``acl_id``."""
        self._acl_ids: MutableMapping[AclBinding, uuid.UUID] = self._map()
        """The id of each ACL by its content (an ACL is stored once: Kafka's
        ``AclControlManager.existingAcls``)."""
        self.client_quotas: MutableMapping[QuotaEntity, dict[str, float]] = self._map()
        """Client quotas (KIP-546) by entity (``metadata.client_quotas``): each entity's
        quota keys and values; an entity with none left is gone."""
        self.delegation_tokens: MutableMapping[str, TokenInformation] = self._map()
        """Delegation tokens (KIP-48) by token id (Kafka's DelegationTokenImage)."""
        self._scalars: MutableMapping[str, int] = self._map()

    def _map(self) -> MutableMapping[Any, Any]:
        return TimelineHashMap(self.registry) if self.registry is not None else {}

    @property
    def next_producer_id(self) -> int:
        return self._scalars.get("next_producer_id", 0)

    @property
    def offset(self) -> int:
        """The offset of the last record replayed (-1 before any)."""
        return self._scalars.get("offset", -1)

    def clear(self) -> None:
        """Forget everything (before loading a snapshot in place of the state)."""
        if self.registry is not None:
            self.registry.reset()
        for mapping in (self.topics_by_name, self.topics_by_id, self.configs, self.brokers,
                        self.controllers, self.features, self.scram, self.acls, self._acl_ids,
                        self.client_quotas, self.delegation_tokens, self._scalars):
            mapping.clear()

    # --- the one way state changes ---------------------------------------------------

    def replay(self, record: Any, offset: int | None = None) -> None:
        if offset is not None:
            self._scalars["offset"] = offset
        handler = self._handlers.get(type(record))
        if handler is not None:
            handler(self, record)

    def _replay_TopicRecord(self, rec: r.TopicRecord) -> None:
        topic = TopicImage(rec.name, rec.topic_id, self._map())
        self.topics_by_name[rec.name] = topic
        self.topics_by_id[rec.topic_id] = topic

    def _replay_PartitionRecord(self, rec: r.PartitionRecord) -> None:
        topic = self.topics_by_id[rec.topic_id]
        topic.partitions[rec.partition_id] = PartitionRegistration(
            list(rec.replicas), list(rec.isr), rec.leader, rec.leader_epoch,
            rec.partition_epoch, list(rec.removing_replicas), list(rec.adding_replicas),
            rec.leader_recovery_state, list(rec.eligible_leader_replicas or ()),
            list(rec.last_known_elr or ()),
            directory_id.normalized(rec.directories, len(rec.replicas)))

    def _replay_PartitionChangeRecord(self, rec: r.PartitionChangeRecord) -> None:
        partitions = self.topics_by_id[rec.topic_id].partitions
        part = partitions[rec.partition_id]
        changes: dict[str, Any] = {"partition_epoch": part.partition_epoch + 1}
        for name, field_name in (("isr", "isr"), ("replicas", "replicas"),
                                 ("removing_replicas", "removing_replicas"),
                                 ("adding_replicas", "adding_replicas"),
                                 ("eligible_leader_replicas", "elr"),
                                 ("last_known_elr", "last_known_elr")):
            value = getattr(rec, name)
            if value is not None:
                changes[field_name] = list(value)
        if rec.directories is not None:
            changes["directories"] = directory_id.normalized(
                rec.directories, len(changes.get("replicas", part.replicas)))
        elif "replicas" in changes:
            changes["directories"] = []  # not known for the new replicas: MIGRATING
        if rec.leader_recovery_state != -1:
            changes["leader_recovery_state"] = rec.leader_recovery_state
        if rec.leader != -2:
            changes["leader"] = rec.leader
            changes["leader_epoch"] = part.leader_epoch + 1
        partitions[rec.partition_id] = dataclasses.replace(part, **changes)

    def _replay_RemoveTopicRecord(self, rec: r.RemoveTopicRecord) -> None:
        topic = self.topics_by_id.pop(rec.topic_id)
        del self.topics_by_name[topic.name]
        self.configs.pop((ConfigResourceType.TOPIC, topic.name), None)

    def _replay_ConfigRecord(self, rec: r.ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        entries = dict(self.configs.get(key, {}))
        if rec.value is None:
            entries.pop(rec.name, None)
        else:
            entries[rec.name] = rec.value
        if entries:
            self.configs[key] = entries
        else:
            self.configs.pop(key, None)

    def _replay_RegisterBrokerRecord(self, rec: r.RegisterBrokerRecord) -> None:
        self.brokers[rec.broker_id] = BrokerRegistration(
            rec.broker_id, rec.broker_epoch, rec.incarnation_id,
            {e.name: Endpoint(e.name, e.host, e.port, e.security_protocol)
             for e in rec.end_points},
            rec.rack, rec.fenced, rec.in_controlled_shutdown, _dirs(rec.log_dirs),
            _features(rec.features),
            None if rec.cordoned_log_dirs is None else _dirs(rec.cordoned_log_dirs))

    def _replay_BrokerRegistrationChangeRecord(self, rec: r.BrokerRegistrationChangeRecord
                                               ) -> None:
        """Fencing, controlled shutdown, online log dirs: each only when the record
        changes it (Kafka's ``replayRegistrationChange``; an empty dir list is no
        change). A record for another registration of the broker is ignored."""
        broker = self.brokers.get(rec.broker_id)
        if broker is None or broker.epoch != rec.broker_epoch:
            return
        changes: dict[str, Any] = {}
        if rec.fenced in (-1, 1):
            changes["fenced"] = rec.fenced == 1
        if rec.in_controlled_shutdown == 1:
            changes["in_controlled_shutdown"] = True
        if rec.log_dirs:
            changes["directories"] = _dirs(rec.log_dirs)
        if rec.cordoned_log_dirs is not None:
            changes["cordoned_directories"] = _dirs(rec.cordoned_log_dirs)
        if changes:
            self.brokers[rec.broker_id] = dataclasses.replace(broker, **changes)

    def _replay_RegisterControllerRecord(self, rec: r.RegisterControllerRecord) -> None:
        """A controller's registration replaces its previous one (Kafka's
        ``ClusterControlManager.replay(RegisterControllerRecord)``)."""
        self.controllers[rec.controller_id] = ControllerRegistration(
            rec.controller_id, rec.incarnation_id, rec.zk_migration_ready,
            {e.name: Endpoint(e.name, e.host, e.port, e.security_protocol)
             for e in rec.end_points},
            _features(rec.features))

    def _replay_UnregisterControllerRecord(self, rec: r.UnregisterControllerRecord) -> None:
        self.controllers.pop(rec.controller_id, None)

    def _replay_UnregisterBrokerRecord(self, rec: r.UnregisterBrokerRecord) -> None:
        self.brokers.pop(rec.broker_id, None)

    def _replay_FenceBrokerRecord(self, rec: r.FenceBrokerRecord) -> None:
        if rec.id in self.brokers:
            self.brokers[rec.id] = dataclasses.replace(self.brokers[rec.id], fenced=True)

    def _replay_UnfenceBrokerRecord(self, rec: r.UnfenceBrokerRecord) -> None:
        if rec.id in self.brokers:
            self.brokers[rec.id] = dataclasses.replace(self.brokers[rec.id], fenced=False)

    def _replay_FeatureLevelRecord(self, rec: r.FeatureLevelRecord) -> None:
        if rec.feature_level == 0:
            self.features.pop(rec.name, None)
        else:
            self.features[rec.name] = rec.feature_level

    def _replay_ProducerIdsRecord(self, rec: r.ProducerIdsRecord) -> None:
        self._scalars["next_producer_id"] = rec.next_producer_id

    def _replay_UserScramCredentialRecord(self, rec: r.UserScramCredentialRecord) -> None:
        self.scram[(rec.mechanism, rec.name)] = ScramCredential(
            rec.salt, rec.stored_key, rec.server_key, rec.iterations)

    def _replay_RemoveUserScramCredentialRecord(self, rec: r.RemoveUserScramCredentialRecord
                                                ) -> None:
        self.scram.pop((rec.mechanism, rec.name), None)

    def _replay_AccessControlEntryRecord(self, rec: r.AccessControlEntryRecord) -> None:
        binding = AclBinding.from_codes(rec.resource_type, rec.resource_name,
                                        rec.pattern_type, rec.principal, rec.host,
                                        rec.operation, rec.permission_type, rec.id)
        old = self.acls.get(rec.id)
        if old is not None and self._acl_ids.get(old) == rec.id:
            del self._acl_ids[old]
        self.acls[rec.id] = binding
        self._acl_ids[binding] = rec.id

    def _replay_RemoveAccessControlEntryRecord(self, rec: r.RemoveAccessControlEntryRecord
                                               ) -> None:
        binding = self.acls.pop(rec.id, None)
        if binding is not None and self._acl_ids.get(binding) == rec.id:
            del self._acl_ids[binding]

    def _replay_ClientQuotaRecord(self, rec: r.ClientQuotaRecord) -> None:
        """Set or remove one key of an entity (Kafka's ``ClientQuotaControlManager.replay``;
        a later value replaces an earlier one)."""
        entity = quota_entity((e.entity_type, e.entity_name) for e in rec.entity)
        values = dict(self.client_quotas.get(entity, {}))
        if rec.remove:
            values.pop(rec.key, None)
        else:
            values[rec.key] = float(rec.value)
        if values:
            self.client_quotas[entity] = values
        else:
            self.client_quotas.pop(entity, None)

    def _replay_DelegationTokenRecord(self, rec: r.DelegationTokenRecord) -> None:
        self.delegation_tokens[rec.token_id] = TokenInformation(
            rec.token_id, principal(rec.owner), principal(rec.requester),
            tuple(principal(p) for p in rec.renewers), rec.issue_timestamp,
            rec.max_timestamp, rec.expiration_timestamp)

    def _replay_RemoveDelegationTokenRecord(self, rec: r.RemoveDelegationTokenRecord
                                            ) -> None:
        self.delegation_tokens.pop(rec.token_id, None)

    _handlers: dict[type, Callable[[MetadataImage, Any], None]] = {}

    # --- snapshots -------------------------------------------------------------------

    def to_records(self) -> list[Any]:
        """The image as records that replay to an equal image: what a snapshot holds.
        In a fixed order (features first, then brokers, controllers, topics, configs,
        client quotas, producer ids, ACLs, SCRAM credentials and delegation tokens, as
        Kafka's image writes them; ACLs by id, tokens by token id), so two equal images
        give the same records."""
        records: list[Any] = [r.FeatureLevelRecord(name=name, feature_level=level)
                              for name, level in sorted(self.features.items())]
        register = r.RegisterBrokerRecord.at(self.features.get(METADATA_VERSION,
                                                               METADATA_VERSION_LEVEL))
        for broker in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            records.append(register(
                broker_id=broker.broker_id, incarnation_id=broker.incarnation_id,
                broker_epoch=broker.epoch, rack=broker.rack, fenced=broker.fenced,
                in_controlled_shutdown=broker.in_controlled_shutdown,
                log_dirs=broker.directories, features=_feature_records(broker.features),
                cordoned_log_dirs=broker.cordoned_directories,
                end_points=tuple(r.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                                  security_protocol=e.security_protocol)
                                 for e in broker.endpoints.values())))
        for controller in sorted(self.controllers.values(), key=lambda c: c.controller_id):
            records.append(r.RegisterControllerRecord(
                controller_id=controller.controller_id,
                incarnation_id=controller.incarnation_id,
                zk_migration_ready=controller.zk_migration_ready,
                end_points=tuple(r.BrokerEndpoint(name=e.name, host=e.host, port=e.port,
                                                  security_protocol=e.security_protocol)
                                 for e in controller.endpoints.values()),
                features=_feature_records(controller.features)))
        for topic in sorted(self.topics_by_id.values(), key=lambda t: t.name):
            records.append(r.TopicRecord(name=topic.name, topic_id=topic.topic_id))
            for index, part in sorted(topic.partitions.items()):
                records.append(r.PartitionRecord(
                    partition_id=index, topic_id=topic.topic_id, replicas=tuple(part.replicas),
                    isr=tuple(part.isr), removing_replicas=tuple(part.removing_replicas),
                    adding_replicas=tuple(part.adding_replicas), leader=part.leader,
                    leader_recovery_state=part.leader_recovery_state,
                    leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
                    directories=tuple(part.directory_list()),
                    eligible_leader_replicas=tuple(part.elr) or None,
                    last_known_elr=tuple(part.last_known_elr) or None))
        for (resource_type, resource_name), entries in sorted(self.configs.items()):
            records.extend(r.ConfigRecord(resource_type=resource_type,
                                          resource_name=resource_name, name=name, value=value)
                           for name, value in sorted(entries.items()))
        for entity, values in sorted(self.client_quotas.items(),
                                     key=lambda item: entity_sort_key(item[0])):
            records.extend(r.ClientQuotaRecord(
                entity=tuple(r.ClientQuotaEntityData(entity_type=kind, entity_name=name)
                             for kind, name in entity), key=key, value=f64(value))
                for key, value in sorted(values.items()))
        if self.next_producer_id:
            records.append(r.ProducerIdsRecord(broker_id=-1,
                                               next_producer_id=self.next_producer_id))
        for acl_id, acl in sorted(self.acls.items(), key=lambda item: item[0].int):
            records.append(r.AccessControlEntryRecord(
                id=acl_id, resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                operation=acl.operation, permission_type=acl.permission_type))
        for (mechanism, user), credential in sorted(self.scram.items(),
                                                    key=lambda item: (item[0][1], item[0][0])):
            records.append(r.UserScramCredentialRecord(
                name=user, mechanism=mechanism, salt=credential.salt,
                stored_key=credential.stored_key, server_key=credential.server_key,
                iterations=credential.iterations))
        records.extend(token_record(token) for _, token in sorted(self.delegation_tokens.items()))
        return records

    def digest(self) -> str:
        """A fingerprint of the state (not of the offset): equal images, equal digests."""
        h = hashlib.sha256()
        for record in self.to_records():
            h.update(r.encode(record))
        return h.hexdigest()

    # --- queries ---------------------------------------------------------------------

    def topic_configs(self, name: str) -> dict[str, str]:
        return self.configs.get((ConfigResourceType.TOPIC, name), {})

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """Dynamic broker configs: per broker if ``broker_id`` is given, else cluster-wide."""
        name = "" if broker_id is None else str(broker_id)
        return self.configs.get((ConfigResourceType.BROKER, name), {})

    def scram_credential(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        """The SCRAM credential of ``user`` for ``mechanism``, or None: what a SASL/SCRAM
        exchange on a broker checks the client's proof against."""
        return self.scram.get((int(mechanism), user))

    def scram_users(self) -> dict[str, list[tuple[int, int]]]:
        """Every user with a SCRAM credential, sorted, with the (mechanism number,
        iterations) of each of its credentials by mechanism: what
        DescribeUserScramCredentials tells (never the salt or keys)."""
        users: dict[str, list[tuple[int, int]]] = {}
        for (mechanism, user), credential in sorted(self.scram.items(),
                                                    key=lambda item: (item[0][1], item[0][0])):
            users.setdefault(user, []).append((mechanism, credential.iterations))
        return users

    def acl_bindings(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every ACL ``acl_filter`` matches (all without one), each with its id, in a
        fixed order (resource type, name, pattern type, principal, host, operation,
        permission): what DescribeAcls answers and DeleteAcls removes."""
        found = [acl for acl in self.acls.values()
                 if acl_filter is None or acl_filter.matches(acl)]
        found.sort(key=lambda a: (a.resource_type, a.resource_name, a.pattern_type,
                                  a.principal, a.host, a.operation, a.permission_type))
        return found

    def acl_id(self, binding: AclBinding) -> uuid.UUID | None:
        """The id of the stored ACL equal to ``binding`` (its id aside), or None."""
        return self._acl_ids.get(binding)

    def live_brokers(self) -> list[BrokerRegistration]:
        return sorted((b for b in self.brokers.values() if not b.fenced),
                      key=lambda b: b.broker_id)


def token_record(token: TokenInformation) -> r.DelegationTokenRecord:
    """The record a token replays from (Kafka's ``DelegationTokenData.toRecord``)."""
    return r.DelegationTokenRecord(
        owner=str(token.owner), requester=str(token.requester),
        renewers=tuple(str(p) for p in token.renewers),
        issue_timestamp=token.issue_timestamp, max_timestamp=token.max_timestamp,
        expiration_timestamp=token.expiry_timestamp, token_id=token.token_id)


MetadataImage._handlers = {
    getattr(r, name[len("_replay_"):]): function
    for name, function in vars(MetadataImage).items() if name.startswith("_replay_")}
MetadataImage._handlers[r.RegisterBrokerRecordV3] = MetadataImage._handlers[r.RegisterBrokerRecord]
