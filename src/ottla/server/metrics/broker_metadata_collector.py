"""Kafka's ``broker-metadata-metrics`` (BrokerServerMetrics), read when scraped from the
node's metadata publisher: what a broker last applied of ``__cluster_metadata`` and the
errors it met loading and publishing it, and the two histograms BrokerServerMetrics
registers beside them (``kafka.server:type=BrokerMetadataListener``). Kafka registers
them on nodes with the broker role only; so are they served here."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily

from ottla.server.metadata_publisher import MetadataPublisher
from ottla.server.metrics.jmx_names import QUANTILES, group_metric, histogram, yammer_quantile
from ottla.server.metrics.log_flush_stats import RESERVOIR, Reservoir

GROUP = "broker-metadata-metrics"


class BrokerMetadataMetricsCollector:
    """``kafka_server_broker_metadata_metrics_*``, named as ``raft-metrics`` are. The
    lag is now less the last applied batch's append time, as Kafka computes it (so it
    grows while nothing new is committed, and is now + 1 before anything is applied)."""

    def __init__(self, publisher: MetadataPublisher, now_ms: Callable[[], int]) -> None:
        self.publisher = publisher
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        publisher = self.publisher
        timestamp = publisher.last_applied_timestamp
        for attribute, value, doc in (
                ("last-applied-record-offset", publisher.applied_offset,
                 "The offset of the last record from the cluster metadata partition that "
                 "was applied by the broker"),
                ("last-applied-record-timestamp", timestamp,
                 "The timestamp of the last record from the cluster metadata partition "
                 "that was applied by the broker"),
                ("last-applied-record-lag-ms", self.now_ms() - timestamp,
                 "The difference between now and the timestamp of the last record from "
                 "the cluster metadata partition that was applied by the broker"),
                ("metadata-load-error-count", publisher.load_errors,
                 "The number of errors encountered by the BrokerMetadataListener while "
                 "loading the metadata log and generating a new MetadataDelta based on it."),
                ("metadata-apply-error-count", publisher.apply_errors,
                 "The number of errors encountered by the BrokerMetadataPublisher while "
                 "applying a new MetadataImage based on the latest MetadataDelta.")):
            yield GaugeMetricFamily(group_metric(GROUP, attribute),
                                    f"{doc} (kafka.server:type={GROUP} {attribute})",
                                    value=value)
        stats = publisher.batch_stats
        if stats is not None:
            yield summary("MetadataBatchSizes", stats.sizes, "Records of each metadata "
                          "log batch applied")
            yield summary("MetadataBatchProcessingTimeUs", stats.processing_time_us,
                          "Microseconds each metadata log batch took to replay")


def summary(name: str, reservoir: Reservoir, doc: str) -> SummaryMetricFamily:
    """A Yammer histogram of ``kafka.server:type=BrokerMetadataListener`` as the
    exporter's rules serve one with no further key (quantiles and ``_count``; ``_sum``
    besides)."""
    count, total, recent = reservoir.snapshot()
    family = SummaryMetricFamily(
        histogram("kafka.server", "BrokerMetadataListener", name),
        f"{doc} (kafka.server:type=BrokerMetadataListener,name={name}); quantiles of "
        f"the last {RESERVOIR}")
    for label, quantile in QUANTILES:
        family.add_sample(family.name, {"quantile": label}, yammer_quantile(recent, quantile))
    family.add_sample(family.name + "_count", {}, count)
    family.add_sample(family.name + "_sum", {}, total)
    return family
