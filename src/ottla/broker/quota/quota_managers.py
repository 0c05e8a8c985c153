"""The quota managers of a node (Kafka's ``QuotaManagers``), fed from the metadata image's
client quotas, and the node's ``client.quota.callback.class`` if it has one (Kafka's
QuotaFactory gives the one callback to every manager, and its
DynamicTopicClusterQuotaPublisher the cluster's metadata)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from ottla.broker.quota.client_quota_callback import (
    ClientQuotaCallback,
    Cluster,
    PartitionInfo,
)
from ottla.broker.quota.client_quota_manager import (
    ABSENT,
    DEFAULT,
    ClientQuotaManager,
    QuotaKey,
    QuotaSensors,
    QuotaType,
)
from ottla.broker.quota.connection_rate_quota import ConnectionRateQuotas
from ottla.broker.quota.controller_mutation_quota import ControllerMutationQuotaManager
from ottla.broker.quota.delay_queue import DelayQueue
from ottla.broker.quota.token_bucket import TokenBucket
from ottla.common.stats.rate import Rate
from ottla.metadata.client_quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    IP,
    USER,
    QuotaEntity,
)
from ottla.metadata.image import MetadataImage

KAFKA_NAMES: dict[QuotaType, str] = {
    QuotaType.PRODUCE: "Produce", QuotaType.FETCH: "Fetch", QuotaType.REQUEST: "Request",
    QuotaType.CONTROLLER_MUTATION: "ControllerMutation"}
"""Kafka's ``QuotaType`` names: its metrics groups, and what a request's
``throttle_quota`` names."""


def quota_key(entity: QuotaEntity) -> QuotaKey:
    """A user and client id entity as a manager keys its quota."""
    names = dict(entity)
    return (names.get(USER, DEFAULT) if USER in names else ABSENT,
            names.get(CLIENT_ID, DEFAULT) if CLIENT_ID in names else ABSENT)


class ClientQuotaManagers:
    """The client quota managers of a node (Kafka's QuotaManagers, the client part):
    produce bytes, fetch bytes, request time, controller mutations. Each follows the
    metadata image's quotas of its key (Kafka's ClientQuotaMetadataManager). Produce and
    Fetch record into the first two on a broker, CreateTopics, CreatePartitions and
    DeleteTopics into the last on a controller; every listener charges request time
    into the third. IP entities' ``connection_creation_rate`` goes to the listeners'
    connection rates."""

    def __init__(self, samples: int = 11, window_seconds: int = 1,
                 controller_samples: int = 11, controller_window_seconds: int = 1,
                 connection_rates: ConnectionRateQuotas | None = None) -> None:
        self.connection_rates = connection_rates if connection_rates is not None \
            else ConnectionRateQuotas(samples, window_seconds)
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, samples, window_seconds)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, samples, window_seconds)
        self.request = ClientQuotaManager(QuotaType.REQUEST, samples, window_seconds,
                                          max_throttle_ms=window_seconds * 1000)
        self.controller_mutation = ControllerMutationQuotaManager(
            controller_samples, controller_window_seconds)

        self.callback: ClientQuotaCallback | None = None

    def use_callback(self, callback: ClientQuotaCallback) -> None:
        """Every manager asks ``callback`` instead of its own lookup from now on."""
        self.callback = callback
        for manager in self.managers:
            manager.use_callback(callback)

    def update_cluster_metadata(self, image: MetadataImage, cluster_id: str) -> None:
        """Give the callback the cluster as ``image`` has it; if it says its quotas
        changed, every manager asks for them again."""
        callback = self.callback
        update = getattr(callback, "update_cluster_metadata", None)
        if update is not None and update(cluster_of(image, cluster_id)):
            for manager in self.managers:
                manager.refresh_bounds()

    @property
    def managers(self) -> tuple[QuotaSensors[Rate] | QuotaSensors[TokenBucket], ...]:
        return self.produce, self.fetch, self.request, self.controller_mutation

    @property
    def delay_queues(self) -> dict[str, DelayQueue]:
        """Each manager's delay queue by Kafka's ``QuotaType`` name."""
        return {KAFKA_NAMES[m.quota_type]: m.delay_queue for m in self.managers}

    def load(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Every quota of the image (at start, and after a snapshot)."""
        for manager in self.managers:
            key = manager.quota_type.value
            manager.set_quotas({quota_key(entity): values[key]
                                for entity, values in quotas.items()
                                if key in values and _users_and_clients(entity)})
        self.connection_rates.set_ip_quotas({
            _address(entity): values[CONNECTION_CREATION_RATE]
            for entity, values in quotas.items()
            if CONNECTION_CREATION_RATE in values and _ip(entity)})

    def apply(self, changed: Iterable[QuotaEntity],
              quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The quotas of the entities a commit changed, as the image now has them."""
        for entity in changed:
            if _ip(entity):
                self.connection_rates.update_ip_quota(
                    _address(entity), quotas.get(entity, {}).get(CONNECTION_CREATION_RATE))
            if not _users_and_clients(entity):
                continue
            values = quotas.get(entity, {})
            for manager in self.managers:
                manager.update_quota(quota_key(entity), values.get(manager.quota_type.value))


def cluster_of(image: MetadataImage, cluster_id: str) -> Cluster:
    """What a callback sees of the cluster (Kafka's ``MetadataCache.toCluster``): the
    unfenced brokers and every topic's partitions."""
    return Cluster(
        cluster_id, frozenset(b.broker_id for b in image.brokers.values() if not b.fenced),
        {name: tuple(PartitionInfo(name, index, p.leader, tuple(p.replicas), tuple(p.isr))
                     for index, p in sorted(topic.partitions.items()))
         for name, topic in image.topics_by_name.items()})


def _users_and_clients(entity: QuotaEntity) -> bool:
    return bool(entity) and all(kind in (USER, CLIENT_ID) for kind, _ in entity)


def _ip(entity: QuotaEntity) -> bool:
    return len(entity) == 1 and entity[0][0] == IP


def _address(entity: QuotaEntity) -> str | None:
    """An IP entity's address as the network reports a peer's (``::1``, not
    ``0:0:0:0:0:0:0:1``); None for the default ip."""
    name = entity[0][1]
    if name is None:
        return None
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        return name  # a host name: it never matches a peer address
