"""The transaction coordinator's metrics, read when scraped: the
``transaction-coordinator-metrics`` group Kafka 4.4's TransactionStateManager registers
(``partition-load-time-avg`` and ``-max`` of the ``__transaction_state`` partitions this
broker took on), and the two Yammer gauges of its TransactionMarkerChannelManager
(``kafka.coordinator.transaction:type=TransactionMarkerChannelManager``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.broker.coordinators.transaction_coordinator import TransactionCoordinatorService
from ottla.server.metrics.jmx_names import gauge, group_metric

GROUP = "transaction-coordinator-metrics"
DOMAIN = "kafka.coordinator.transaction"
MARKERS = "TransactionMarkerChannelManager"


class TransactionCoordinatorCollector:
    """``kafka_server_transaction_coordinator_metrics_partition_load_time_{avg,max}``
    (named as ``raft-metrics`` are; NaN with no load in the windows, as Kafka's ``Avg``
    and ``Max`` of nothing) and
    ``kafka_coordinator_transaction_transactionmarkerchannelmanager_*`` (the KRaft
    rules' ``kafka.coordinator.(\\w+)`` gauge rule)."""

    def __init__(self, coordinator: TransactionCoordinatorService,
                 now_ms: Callable[[], int]) -> None:
        self.coordinator = coordinator
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        metrics = self.coordinator.runtime.metrics
        now_ms = self.now_ms()
        for attribute, stat, doc in (
                ("partition-load-time-max", metrics.partition_load_time_max,
                 "The max time it took to load the partitions in the last 30sec"),
                ("partition-load-time-avg", metrics.partition_load_time_avg,
                 "The avg time it took to load the partitions in the last 30sec")):
            yield GaugeMetricFamily(group_metric(GROUP, attribute),
                                    f"{doc} (kafka.server:type={GROUP} {attribute})",
                                    value=stat.measure(now_ms))
        markers = self.coordinator.markers
        for name, value, doc in (
                ("UnknownDestinationQueueSize", len(markers.unknown_destination),
                 "Transactions whose markers wait for a partition's leader to be known"),
                ("LogAppendRetryQueueSize", len(markers.log_append_retry),
                 "Transactions whose completion waits to be appended to "
                 "__transaction_state again")):
            yield GaugeMetricFamily(gauge(DOMAIN, MARKERS, name),
                                    f"{doc} ({DOMAIN}:type={MARKERS},name={name})",
                                    value=value)
