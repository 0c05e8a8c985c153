"""One node's metrics: its own ``CollectorRegistry`` (never the process-wide default, so
that several nodes in one process, as in tests, each serve only their own) with a
collector per group, served by a ``MetricsEndpoint``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, ProcessCollector

from ottla.broker.broker import Broker
from ottla.metadata.image import MetadataImage
from ottla.server.controller_driver import ControllerDriver
from ottla.server.metrics.broker_collectors import (
    BrokerTopicMetricsCollector,
    ReplicaManagerCollector,
)
from ottla.server.metrics.controller_collector import KafkaControllerCollector
from ottla.server.metrics.endpoint import MetricsEndpoint
from ottla.server.metrics.request_collector import (
    RequestMetricsCollector,
    SocketServerCollector,
)
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.network import KafkaServer


def node_registry(*, image: MetadataImage, requests: RequestChannelMetrics,
                  servers: Callable[[], Iterable[KafkaServer]], broker: Broker | None,
                  controller: ControllerDriver | None) -> CollectorRegistry:
    """The registry of a node with these roles (``broker`` and ``controller`` None where
    the node lacks the role)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    registry.register(RequestMetricsCollector(requests))
    registry.register(SocketServerCollector(servers))
    if broker is not None:
        assert broker.topic_stats is not None, "the broker must be counting"
        registry.register(BrokerTopicMetricsCollector(broker.topic_stats, image))
        registry.register(ReplicaManagerCollector(broker.replica_manager, image))
    if controller is not None:
        registry.register(KafkaControllerCollector(controller, image))
    return registry


__all__ = ["MetricsEndpoint", "node_registry"]
