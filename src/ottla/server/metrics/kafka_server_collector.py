"""``kafka.server:type=KafkaServer,name=BrokerState``: where the broker is in its
lifecycle (Kafka's BrokerState numbers: 1 starting, 2 recovery, 3 running, 6 pending
controlled shutdown, 7 shutting down), the gauge Kafka dashboards show per broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.server.broker_lifecycle import BrokerState
from ottla.server.metrics.jmx_names import gauge


class KafkaServerCollector:
    """``kafka_server_kafkaserver_brokerstate`` of a node with the broker role;
    ``state`` reads its lifecycle (NOT_RUNNING, 0, before the lifecycle starts)."""

    def __init__(self, state: Callable[[], BrokerState]) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(gauge("kafka.server", "KafkaServer", "BrokerState"),
                                "The broker's state (kafka.server:type=KafkaServer,"
                                "name=BrokerState)", value=int(self.state()))
