"""The metadata image: cluster state rebuilt by replaying ``__cluster_metadata`` records.

Both the controller (at write time) and the broker (at commit time) hold one and feed it
the same records through ``replay``; nothing else mutates it. That is the "one replay
path" of the design: restarting a node is replaying its log.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ottla.metadata import records as r

NO_LEADER = -1


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids, as used by DescribeConfigs and ConfigRecord."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


@dataclass(slots=True)
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


@dataclass(slots=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int


@dataclass(slots=True)
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: dict[str, Endpoint]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False


class MetadataImage:
    def __init__(self) -> None:
        self.topics_by_name: dict[str, TopicImage] = {}
        self.topics_by_id: dict[uuid.UUID, TopicImage] = {}
        self.configs: dict[tuple[int, str], dict[str, str]] = {}
        self.brokers: dict[int, BrokerRegistration] = {}
        self.features: dict[str, int] = {}
        self.next_producer_id = 0
        self.offset = -1
        """The offset of the last record replayed."""

    # --- the one way state changes ---------------------------------------------------

    def replay(self, record: Any, offset: int | None = None) -> None:
        if offset is not None:
            self.offset = offset
        handler = getattr(self, f"_replay_{type(record).__name__}", None)
        if handler is not None:
            handler(record)

    def _replay_TopicRecord(self, rec: r.TopicRecord) -> None:
        topic = TopicImage(rec.name, rec.topic_id)
        self.topics_by_name[rec.name] = topic
        self.topics_by_id[rec.topic_id] = topic

    def _replay_PartitionRecord(self, rec: r.PartitionRecord) -> None:
        topic = self.topics_by_id[rec.topic_id]
        topic.partitions[rec.partition_id] = PartitionRegistration(
            list(rec.replicas), list(rec.isr), rec.leader, rec.leader_epoch,
            rec.partition_epoch, list(rec.removing_replicas), list(rec.adding_replicas),
            rec.leader_recovery_state)

    def _replay_PartitionChangeRecord(self, rec: r.PartitionChangeRecord) -> None:
        part = self.topics_by_id[rec.topic_id].partitions[rec.partition_id]
        if rec.isr is not None:
            part.isr = list(rec.isr)
        if rec.replicas is not None:
            part.replicas = list(rec.replicas)
        if rec.removing_replicas is not None:
            part.removing_replicas = list(rec.removing_replicas)
        if rec.adding_replicas is not None:
            part.adding_replicas = list(rec.adding_replicas)
        if rec.leader_recovery_state != -1:
            part.leader_recovery_state = rec.leader_recovery_state
        if rec.leader != -2:
            part.leader = rec.leader
            part.leader_epoch += 1
        part.partition_epoch += 1

    def _replay_RemoveTopicRecord(self, rec: r.RemoveTopicRecord) -> None:
        topic = self.topics_by_id.pop(rec.topic_id)
        del self.topics_by_name[topic.name]
        self.configs.pop((ConfigResourceType.TOPIC, topic.name), None)

    def _replay_ConfigRecord(self, rec: r.ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        if rec.value is None:
            entries = self.configs.get(key)
            if entries is not None:
                entries.pop(rec.name, None)
                if not entries:
                    del self.configs[key]
        else:
            self.configs.setdefault(key, {})[rec.name] = rec.value

    def _replay_RegisterBrokerRecord(self, rec: r.RegisterBrokerRecord) -> None:
        self.brokers[rec.broker_id] = BrokerRegistration(
            rec.broker_id, rec.broker_epoch, rec.incarnation_id,
            {e.name: Endpoint(e.name, e.host, e.port, e.security_protocol)
             for e in rec.end_points},
            rec.rack, rec.fenced, rec.in_controlled_shutdown)

    def _replay_UnregisterBrokerRecord(self, rec: r.UnregisterBrokerRecord) -> None:
        self.brokers.pop(rec.broker_id, None)

    def _replay_FenceBrokerRecord(self, rec: r.FenceBrokerRecord) -> None:
        if rec.id in self.brokers:
            self.brokers[rec.id].fenced = True

    def _replay_UnfenceBrokerRecord(self, rec: r.UnfenceBrokerRecord) -> None:
        if rec.id in self.brokers:
            self.brokers[rec.id].fenced = False

    def _replay_FeatureLevelRecord(self, rec: r.FeatureLevelRecord) -> None:
        if rec.feature_level == 0:
            self.features.pop(rec.name, None)
        else:
            self.features[rec.name] = rec.feature_level

    def _replay_ProducerIdsRecord(self, rec: r.ProducerIdsRecord) -> None:
        self.next_producer_id = rec.next_producer_id

    # --- queries ---------------------------------------------------------------------

    def topic_configs(self, name: str) -> dict[str, str]:
        return self.configs.get((ConfigResourceType.TOPIC, name), {})

    def broker_configs(self, broker_id: int | None) -> dict[str, str]:
        """Dynamic broker configs: per broker if ``broker_id`` is given, else cluster-wide."""
        name = "" if broker_id is None else str(broker_id)
        return self.configs.get((ConfigResourceType.BROKER, name), {})

    def live_brokers(self) -> list[BrokerRegistration]:
        return sorted((b for b in self.brokers.values() if not b.fenced),
                      key=lambda b: b.broker_id)
