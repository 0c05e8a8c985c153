"""One node's metrics: its own ``CollectorRegistry`` (never the process-wide default, so
that several nodes in one process, as in tests, each serve only their own) with a
collector per group, served by a ``MetricsEndpoint``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from prometheus_client import CollectorRegistry, ProcessCollector

from ottla.broker.broker import Broker
from ottla.broker.deadline_timer import monotonic_ms
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.broker.telemetry.client_telemetry_exporter import ClientTelemetryExporter
from ottla.metadata.image import MetadataImage
from ottla.security.authorizer import StandardAuthorizer
from ottla.security.authorizer_metrics import AuthorizerMetrics
from ottla.server.broker_lifecycle import BrokerState
from ottla.server.controller_driver import ControllerDriver
from ottla.server.metadata_publisher import MetadataPublisher
from ottla.server.metrics.authorizer_collector import AuthorizerCollector
from ottla.server.metrics.broker_collectors import (
    BrokerTopicMetricsCollector,
    LogCollector,
    LogFlushStatsCollector,
    LogManagerCollector,
    PartitionCollector,
    PurgatoryCollector,
    ReplicaFetcherManagerCollector,
    ReplicaManagerCollector,
)
from ottla.server.metrics.broker_metadata_collector import BrokerMetadataMetricsCollector
from ottla.server.metrics.client_telemetry_collector import ClientTelemetryCollector
from ottla.server.metrics.consumer_lag import ConsumerLagCollector
from ottla.server.metrics.controller_collector import KafkaControllerCollector
from ottla.server.metrics.coordinator_runtime_collector import CoordinatorRuntimeCollector
from ottla.server.metrics.endpoint import MetricsEndpoint
from ottla.server.metrics.event_loop_idle import EventLoopIdle
from ottla.server.metrics.fetch_session_cache_collector import FetchSessionCacheCollector
from ottla.server.metrics.group_coordinator_collector import GroupCoordinatorCollector
from ottla.server.metrics.kafka_server_collector import KafkaServerCollector
from ottla.server.metrics.log_cleaner_collector import LogCleanerCollector
from ottla.server.metrics.log_flush_stats import LogFlushStats
from ottla.server.metrics.quota_collector import ClientQuotaCollector
from ottla.server.metrics.raft_collector import RaftMetricsCollector
from ottla.server.metrics.request_collector import (
    EventLoopIdleCollector,
    RequestMetricsCollector,
    SocketServerCollector,
)
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.metrics.transaction_coordinator_collector import (
    TransactionCoordinatorCollector,
)
from ottla.server.network import KafkaServer
from ottla.server.raft_driver import RaftDriver
from ottla.storage.cleaner import LogCleaner


class NodeRegistry(CollectorRegistry):
    """A node's collectors, and what the endpoint awaits before collecting them
    (``prepare``: the few things a scrape asks of other nodes, bounded in time)."""

    def __init__(self) -> None:
        super().__init__()
        self.prepare: list[Callable[[], Awaitable[None]]] = []


def node_registry(*, image: MetadataImage, requests: RequestChannelMetrics,
                  servers: Callable[[], Iterable[KafkaServer]], broker: Broker | None,
                  controller: ControllerDriver | None, raft: RaftDriver | None = None,
                  loop_idle: EventLoopIdle | None = None,
                  log_flush: LogFlushStats | None = None,
                  client_quotas: tuple[ClientQuotaManagers, Callable[[], int]] | None = None,
                  publisher: MetadataPublisher | None = None,
                  authorizer: tuple[StandardAuthorizer | None, AuthorizerMetrics,
                                    Callable[[], int]] | None = None,
                  broker_state: Callable[[], BrokerState] | None = None,
                  cleaner: LogCleaner | None = None) -> NodeRegistry:
    """The registry of a node with these roles (``broker`` and ``controller`` None where
    the node lacks the role); ``raft`` is its KRaft client (None in tests without one),
    ``loop_idle`` its event loop's sampler and ``log_flush`` its segment flush timer
    (None: not served), ``client_quotas`` its quota managers and the clock their
    sensors are read at (None: not served), ``publisher`` what applies its metadata
    (a broker's ``broker-metadata-metrics``; None: not served), ``authorizer`` its
    authorizer, that authorizer's metrics per role and their clock (not served without
    an authorizer), ``broker_state`` the broker's lifecycle state, ``cleaner`` the
    broker's log cleaner when it runs (None: not served)."""
    registry = NodeRegistry()
    ProcessCollector(registry=registry)
    registry.register(RequestMetricsCollector(requests))
    if client_quotas is not None:
        registry.register(ClientQuotaCollector(*client_quotas))
    registry.register(SocketServerCollector(servers))
    if loop_idle is not None:
        registry.register(EventLoopIdleCollector(loop_idle))
    if log_flush is not None:  # partition logs' segments, and the metadata log's
        registry.register(LogFlushStatsCollector(log_flush))
    if raft is not None:
        registry.register(RaftMetricsCollector(raft))
    if broker is not None:
        assert broker.topic_stats is not None, "the broker must be counting"
        registry.register(BrokerTopicMetricsCollector(broker.topic_stats, image))
        replicas = ReplicaManagerCollector(broker.replica_manager, image)
        registry.register(replicas)
        registry.register(PartitionCollector(broker.replica_manager, replicas))
        registry.register(PurgatoryCollector(lambda: (
            broker.replica_manager.produce_purgatory, broker.replica_manager.fetch_purgatory,
            broker.share_partitions.fetch_purgatory)))
        registry.register(ReplicaFetcherManagerCollector(broker.replica_fetchers))
        registry.register(FetchSessionCacheCollector(broker.fetch_sessions))
        registry.register(LogCollector(broker.replica_manager))
        registry.register(LogManagerCollector(broker.replica_manager.log_manager))
        if cleaner is not None:
            registry.register(LogCleanerCollector(cleaner, broker.now_ms))
        if broker_state is not None:
            registry.register(KafkaServerCollector(broker_state))
        if publisher is not None:
            registry.register(BrokerMetadataMetricsCollector(publisher, broker.now_ms))
        registry.register(GroupCoordinatorCollector(broker.group_coordinator))
        for service, group in ((broker.group_coordinator, "group-coordinator-metrics"),
                               (broker.share_coordinator, "share-coordinator-metrics")):
            registry.register(CoordinatorRuntimeCollector(service, group, broker.now_ms,
                                                          monotonic_ms))
        registry.register(TransactionCoordinatorCollector(broker.transaction_coordinator,
                                                          broker.now_ms))
        lag = ConsumerLagCollector(broker)
        registry.register(lag)
        registry.prepare.append(lag.prepare)
        receiver = broker.client_metrics.receiver
        if isinstance(receiver, ClientTelemetryExporter):
            registry.register(ClientTelemetryCollector(receiver, broker.now_ms))
    if controller is not None:
        registry.register(KafkaControllerCollector(
            controller, image, publisher.loader if publisher is not None else None))
    if authorizer is not None and authorizer[0] is not None:
        roles = [role for role, present in (("broker", broker is not None),
                                            ("controller", controller is not None)) if present]
        registry.register(AuthorizerCollector(authorizer[0], authorizer[1], roles,
                                              authorizer[2]))
    return registry


__all__ = ["MetricsEndpoint", "NodeRegistry", "node_registry"]
