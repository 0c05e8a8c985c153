"""What a run of committed metadata records changed (Kafka's MetadataDelta), and what that
means for one broker's replicas (Kafka's ``TopicsDelta.localChanges``).

The loader notes each record it applies here, by key, so that the broker's replica
manager and coordinators look at the partitions and configs that changed instead of
diffing the whole image on every commit. A snapshot replaces the image: its delta is
``full``, and whoever follows the image starts over from it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from ottla.common.topics import TopicPartition
from ottla.metadata import records as r
from ottla.metadata.client_quotas import QuotaEntity, quota_entity
from ottla.metadata.image import ConfigResourceType, MetadataImage, PartitionRegistration
from ottla.security.acl import AclBinding


@dataclass(slots=True)
class MetadataDelta:
    full: bool = False
    """A snapshot replaced the image: everything may have changed."""
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    """(topic id, partition) created or changed (leader, ISR, replicas)."""
    removed_topics: dict[uuid.UUID, str] = field(default_factory=dict)
    """Topics deleted, by id, with the name they had."""
    removed_partition_counts: dict[uuid.UUID, int] = field(default_factory=dict)
    """How many partitions each deleted topic had."""
    topic_configs: set[str] = field(default_factory=set)
    """Topics whose dynamic configs changed."""
    broker_configs: bool = False
    """Dynamic broker configs changed: the defaults of every topic may have."""
    broker_config_resources: set[str] = field(default_factory=set)
    """The broker resources whose configs had records: a broker id, "" for the cluster
    default (a record setting a value again counts: it reloads a keystore file)."""
    client_metrics: bool = False
    """Client-metrics subscriptions (KIP-714) changed."""
    brokers: set[int] = field(default_factory=set)
    """Brokers registered, fenced, unfenced, changed (their log dirs) or gone."""
    controllers: set[int] = field(default_factory=set)
    """Controllers (re-)registered (KIP-919)."""
    features: bool = False
    scram_users: set[str] = field(default_factory=set)
    """Users whose SCRAM credentials were set or removed (Kafka's ScramDelta)."""
    acl_changes: dict[uuid.UUID, AclBinding | None] = field(default_factory=dict)
    """Kafka's AclsDelta: the ACL now under each id that changed, None for one removed
    (also for one added and removed within the delta, which Kafka leaves out: removing
    an ACL the authorizer never had does nothing). What an authorizer
    applies (``StandardAuthorizer.apply_changes``); after a ``full`` delta it loads the
    image's ACLs instead."""
    client_quotas: set[QuotaEntity] = field(default_factory=set)
    """Entities whose client quotas were set or removed (Kafka's ClientQuotasDelta):
    what a broker's quota managers read again from the image."""
    delegation_tokens: set[str] = field(default_factory=set)
    """Delegation tokens issued, renewed or removed, by id (Kafka's
    DelegationTokenDelta)."""

    def note(self, record: Any, image: MetadataImage) -> None:
        """Note what ``record`` changes; call it before the image replays the record
        (a RemoveTopicRecord names its topic only by id)."""
        match record:
            case r.PartitionRecord() | r.PartitionChangeRecord():
                self.partitions.add((record.topic_id, record.partition_id))
            case r.RemoveTopicRecord():
                topic = image.topics_by_id.get(record.topic_id)
                if topic is not None:
                    self.removed_topics[record.topic_id] = topic.name
                    self.removed_partition_counts[record.topic_id] = len(topic.partitions)
                    self.partitions = {p for p in self.partitions if p[0] != record.topic_id}
            case r.ConfigRecord():
                if record.resource_type == ConfigResourceType.TOPIC:
                    self.topic_configs.add(record.resource_name)
                elif record.resource_type == ConfigResourceType.BROKER:
                    self.broker_configs = True
                    self.broker_config_resources.add(record.resource_name)
                elif record.resource_type == ConfigResourceType.CLIENT_METRICS:
                    self.client_metrics = True
            case (r.RegisterBrokerRecord() | r.UnregisterBrokerRecord()
                  | r.BrokerRegistrationChangeRecord()):
                self.brokers.add(record.broker_id)
            case r.FenceBrokerRecord() | r.UnfenceBrokerRecord():
                self.brokers.add(record.id)
            case r.RegisterControllerRecord():
                self.controllers.add(record.controller_id)
            case r.FeatureLevelRecord():
                self.features = True
            case r.UserScramCredentialRecord() | r.RemoveUserScramCredentialRecord():
                self.scram_users.add(record.name)
            case r.AccessControlEntryRecord():
                self.acl_changes[record.id] = AclBinding.from_codes(
                    record.resource_type, record.resource_name, record.pattern_type,
                    record.principal, record.host, record.operation, record.permission_type,
                    record.id)
            case r.RemoveAccessControlEntryRecord():
                self.acl_changes[record.id] = None
            case r.DelegationTokenRecord() | r.RemoveDelegationTokenRecord():
                self.delegation_tokens.add(record.token_id)
            case r.ClientQuotaRecord():
                self.client_quotas.add(quota_entity(
                    (e.entity_type, e.entity_name) for e in record.entity))

    @property
    def changed(self) -> bool:
        return bool(self.full or self.partitions or self.removed_topics or
                    self.topic_configs or self.broker_configs or self.brokers or self.controllers or
                    self.features or self.scram_users or self.acl_changes or
                    self.client_quotas or self.client_metrics or self.delegation_tokens)


@dataclass(frozen=True, slots=True)
class LocalReplica:
    topic_id: uuid.UUID
    registration: PartitionRegistration


@dataclass(slots=True)
class LocalReplicaChanges:
    """What one broker does about a delta: lead, follow, or stop hosting."""

    leaders: dict[TopicPartition, LocalReplica] = field(default_factory=dict)
    followers: dict[TopicPartition, LocalReplica] = field(default_factory=dict)
    deletes: set[TopicPartition] = field(default_factory=set)
    """Changed partitions this broker is no longer a replica of (whether it hosted them
    is the replica manager's to know)."""
    deleted_topics: dict[uuid.UUID, str] = field(default_factory=dict)
    """Topics deleted: every partition of them hosted here goes."""


def local_changes(delta: MetadataDelta, image: MetadataImage, broker_id: int
                  ) -> LocalReplicaChanges:
    """The changed partitions as ``broker_id`` sees them, from the image after the
    delta. (A ``full`` delta is every partition of the image.)"""
    changes = LocalReplicaChanges(deleted_topics=dict(delta.removed_topics))
    keys: list[tuple[uuid.UUID, int]]
    if delta.full:
        keys = [(t.topic_id, p) for t in image.topics_by_id.values() for p in t.partitions]
    else:
        keys = sorted(delta.partitions)
    for topic_id, index in keys:
        topic = image.topics_by_id.get(topic_id)
        if topic is None or index not in topic.partitions:
            continue
        registration = topic.partitions[index]
        tp = (topic.name, index)
        if broker_id not in registration.replicas:
            changes.deletes.add(tp)
        elif registration.leader == broker_id:
            changes.leaders[tp] = LocalReplica(topic_id, registration)
        else:
            changes.followers[tp] = LocalReplica(topic_id, registration)
    return changes

