"""The broker role's metrics, read when scraped: Kafka's BrokerTopicMetrics (what Produce
and Fetch counted, per topic and for all topics) and its ReplicaManager gauges and ISR
meters, its ReplicaFetcherManager's MaxLag, the ``kafka.log:type=Log`` gauges of each
partition log (from the partitions this broker hosts), the LogManager's offline log dirs
and the time of their segments' flushes (LogFlushStats)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from ottla.broker.purgatory.delayed_operation import DelayedOperationPurgatory
from ottla.broker.replication.partition import Partition
from ottla.broker.replication.replica_fetcher import ReplicaFetcherManager
from ottla.broker.replication.replica_manager import ReplicaManager
from ottla.broker.topic_stats import BrokerTopicStats
from ottla.metadata.image import MetadataImage
from ottla.server.metrics.jmx_names import QUANTILES, gauge, histogram, meter, yammer_quantile
from ottla.server.metrics.log_flush_stats import RESERVOIR, LogFlushStats
from ottla.storage.log_manager import LogManager

BROKER_TOPIC_METRICS: tuple[tuple[str, str, str], ...] = (
    ("messages_in", "MessagesInPerSec",
     "Records appended as leader, by Produce and by the broker's coordinators"),
    ("bytes_in", "BytesInPerSec", "Bytes of records appended as leader, as produced"),
    ("bytes_out", "BytesOutPerSec", "Bytes of records sent to consumers by Fetch"),
    ("total_produce_requests", "TotalProduceRequestsPerSec",
     "Partitions of Produce requests and of the broker's own appends that reached the "
     "append"),
    ("failed_produce_requests", "FailedProduceRequestsPerSec",
     "Partitions of Produce requests that failed for an unexpected reason"),
    ("total_fetch_requests", "TotalFetchRequestsPerSec", "Partitions read by Fetch requests"),
    ("failed_fetch_requests", "FailedFetchRequestsPerSec",
     "Partitions of Fetch requests that failed for an unexpected reason"),
)
"""Each ``BrokerTopicMetrics`` counter and the meter of
``kafka.server:type=BrokerTopicMetrics`` it is."""


class BrokerTopicMetricsCollector:
    """``kafka_server_brokertopicmetrics_*_total``: with ``topic`` for each topic that
    had traffic here, without for all topics (Kafka's topic-less bean). Topics the
    metadata no longer has are retired first (their counts stay in the total). The
    replication bytes are served for all topics only, as Kafka has them."""

    def __init__(self, stats: BrokerTopicStats, image: MetadataImage) -> None:
        self.stats = stats
        self.image = image

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        for topic in [t for t in stats.topics if t not in self.image.topics_by_name]:
            stats.remove(topic)
        everything = stats.all_topics
        topics = sorted(stats.topics.items())
        for field, mbean, doc in BROKER_TOPIC_METRICS:
            family = CounterMetricFamily(meter("kafka.server", "BrokerTopicMetrics", mbean),
                                         f"{doc} (kafka.server:type=BrokerTopicMetrics,"
                                         f"name={mbean}[,topic=...] Count)")
            sample = family.name + "_total"
            family.add_sample(sample, {}, getattr(everything, field))
            for topic, metrics in topics:
                family.add_sample(sample, {"topic": topic}, getattr(metrics, field))
            yield family
        for mbean, total, doc in (
                ("ReplicationBytesInPerSec", stats.replication_bytes_in,
                 "Bytes of records followers here got from their leaders"),
                ("ReplicationBytesOutPerSec", stats.replication_bytes_out,
                 "Bytes of records sent to followers by Fetch")):
            # Kafka has these on the all-topics bean only: no topic label.
            yield CounterMetricFamily(meter("kafka.server", "BrokerTopicMetrics", mbean),
                                      f"{doc} (kafka.server:type=BrokerTopicMetrics,"
                                      f"name={mbean} Count)", value=total)


class ReplicaManagerCollector:
    """``kafka_server_replicamanager_*``: Kafka's ReplicaManager gauges, computed from
    the hosted partitions as Kafka's are (``Partition.isUnderReplicated`` and the rest,
    the producer ids their logs keep), and its ISR meters (changes accepted and
    refused)."""

    def __init__(self, replica_manager: ReplicaManager, image: MetadataImage) -> None:
        self.replica_manager = replica_manager
        self.image = image

    def replication_factor(self, partition: Partition) -> int:
        """The replicas less those being added by a reassignment (Kafka's
        ``replicationFactor`` of an ongoing reassignment)."""
        topic = self.image.topics_by_name.get(partition.topic)
        registration = topic.partitions.get(partition.index) if topic is not None else None
        adding = len(registration.adding_replicas) if registration is not None else 0
        return len(partition.state.replicas) - adding

    def _reassigning(self, partition: Partition) -> bool:
        topic = self.image.topics_by_name.get(partition.topic)
        registration = topic.partitions.get(partition.index) if topic is not None else None
        return registration is not None and bool(registration.adding_replicas
                                                 or registration.removing_replicas)

    def collect(self) -> Iterator[Metric]:
        manager = self.replica_manager
        leaders = [p for p in manager.partitions.values() if p.is_leader]
        under_replicated = under_min_isr = at_min_isr = reassigning = 0
        for partition in leaders:
            isr = len(partition.state.isr)
            replication_factor = self.replication_factor(partition)
            min_isr = min(partition.log.config["min.insync.replicas"], replication_factor)
            under_replicated += isr < replication_factor
            under_min_isr += isr < min_isr
            at_min_isr += isr == min_isr
            reassigning += self._reassigning(partition)
        for name, value, doc in (
                ("PartitionCount", len(manager.partitions) + len(manager.offline),
                 "Partitions hosted here, offline ones included"),
                ("LeaderCount", len(leaders), "Partitions led here"),
                ("OfflineReplicaCount", len(manager.offline),
                 "Replicas here whose log dir failed"),
                ("UnderReplicatedPartitions", under_replicated,
                 "Partitions led here whose ISR is smaller than their replicas"),
                ("UnderMinIsrPartitionCount", under_min_isr,
                 "Partitions led here whose ISR is below min.insync.replicas"),
                ("AtMinIsrPartitionCount", at_min_isr,
                 "Partitions led here whose ISR is at min.insync.replicas"),
                ("ReassigningPartitions", reassigning,
                 "Partitions led here being reassigned"),
                ("ProducerIdCount", manager.producer_id_count(),
                 "Producer ids kept in the producer state of the partitions hosted here")):
            yield GaugeMetricFamily(gauge("kafka.server", "ReplicaManager", name),
                                    f"{doc} (kafka.server:type=ReplicaManager,name={name})",
                                    value=value)
        for mbean, value, doc in (
                ("IsrExpandsPerSec", manager.isr_expands,
                 "Followers the controller added to an ISR led here"),
                ("IsrShrinksPerSec", manager.isr_shrinks,
                 "Followers the controller removed from an ISR led here"),
                ("FailedIsrUpdatesPerSec", manager.failed_isr_updates,
                 "ISR changes of partitions led here the controller refused")):
            yield CounterMetricFamily(meter("kafka.server", "ReplicaManager", mbean),
                                      f"{doc} (kafka.server:type=ReplicaManager,"
                                      f"name={mbean} Count)", value=value)


class PartitionCollector:
    """``kafka_cluster_partition_*{topic, partition}``: the gauges Kafka's ``Partition``
    registers for each partition hosted here (``kafka.cluster:type=Partition,name=N,
    topic=T,partition=P``). As in Kafka, the replication ones are the leader's: a
    follower shows 0 for all but LastStableOffsetLag (its high watermark less its last
    stable offset: how far open transactions hold consumers back)."""

    def __init__(self, replica_manager: ReplicaManager, replicas: ReplicaManagerCollector
                 ) -> None:
        self.replica_manager = replica_manager
        self.replicas = replicas

    def collect(self) -> Iterator[Metric]:
        names = ("UnderReplicated", "InSyncReplicasCount", "ReplicasCount", "UnderMinIsr",
                 "AtMinIsr", "LastStableOffsetLag")
        families = [GaugeMetricFamily(gauge("kafka.cluster", "Partition", name),
                                      f"(kafka.cluster:type=Partition,name={name},"
                                      "topic=...,partition=...)",
                                      labels=("topic", "partition")) for name in names]
        for (topic, index), partition in sorted(self.replica_manager.partitions.items()):
            values = [0, 0, 0, 0, 0]
            if partition.is_leader:
                isr = len(partition.state.isr)
                replication_factor = self.replicas.replication_factor(partition)
                min_isr = min(partition.log.config["min.insync.replicas"],
                              replication_factor)
                values = [int(isr < replication_factor), isr, replication_factor,
                          int(isr < min_isr), int(isr == min_isr)]
            lag = 0 if partition.log.offline else \
                partition.high_watermark - partition.last_stable_offset
            labels = (topic, str(index))
            for family, value in zip(families, (*values, lag), strict=True):
                family.add_metric(labels, value)
        yield from families


class PurgatoryCollector:
    """``kafka_server_delayedoperationpurgatory_{purgatorysize,numdelayedoperations}
    {delayedOperation}``: Kafka's DelayedOperationPurgatory gauges of the purgatories
    this broker has (``Produce``: ``acks=all`` produces waiting on followers, ``Fetch``:
    fetches waiting for ``fetch.min.bytes``, ``ShareFetch``). NumDelayedOperations is
    the operations parked, PurgatorySize counts each once per key it waits on."""

    def __init__(self, purgatories: Callable[[], Iterable[DelayedOperationPurgatory[Any]]]
                 ) -> None:
        self.purgatories = purgatories

    def collect(self) -> Iterator[Metric]:
        size, delayed = (GaugeMetricFamily(
            gauge("kafka.server", "DelayedOperationPurgatory", name),
            f"{doc} (kafka.server:type=DelayedOperationPurgatory,name={name},"
            "delayedOperation=...)", labels=("delayedOperation",)) for name, doc in (
                ("PurgatorySize", "Parked operations, once per key each waits on"),
                ("NumDelayedOperations", "Parked operations")))
        for purgatory in self.purgatories():
            size.add_metric((purgatory.name,), purgatory.size())
            delayed.add_metric((purgatory.name,), purgatory.watched())
        yield size
        yield delayed


class ReplicaFetcherManagerCollector:
    """``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``: the largest lag
    in records of the partitions this broker follows (the generic one-key gauge rule
    keeps the bean's ``clientId`` as a label; Kafka's follower fetchers are
    ``Replica``)."""

    def __init__(self, fetchers: ReplicaFetcherManager) -> None:
        self.fetchers = fetchers

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            gauge("kafka.server", "ReplicaFetcherManager", "MaxLag"),
            "Records the leader's high watermark is ahead of this follower, at most over "
            "the partitions it follows (kafka.server:type=ReplicaFetcherManager,"
            "name=MaxLag,clientId=Replica)", labels=("clientId",))
        family.add_metric(("Replica",), self.fetchers.max_lag())
        yield family


LOG_GAUGES: tuple[tuple[str, str], ...] = (
    ("Size", "Bytes of the partition's log segments"),
    ("LogStartOffset", "The first offset of the partition's log"),
    ("LogEndOffset", "The offset the next record appended to the partition gets"),
    ("NumLogSegments", "Segments of the partition's log"),
)
"""Kafka's ``LogMetricNames``: the gauges each ``UnifiedLog`` registers as
``kafka.log:type=Log,name=N,topic=T,partition=P``."""


class LogCollector:
    """``kafka_log_log_{size,logstartoffset,logendoffset,numlogsegments}{topic,
    partition}``: read off the hosted partitions' logs when scraped (Kafka's gauges read
    the log the same way). Offline replicas have no log to read and no series, as in
    Kafka, whose failed log dir closes their logs and removes their metrics."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def collect(self) -> Iterator[Metric]:
        families = [GaugeMetricFamily(gauge("kafka.log", "Log", name),
                                      f"{doc} (kafka.log:type=Log,name={name},topic=...,"
                                      f"partition=...)", labels=("topic", "partition"))
                    for name, doc in LOG_GAUGES]
        size, start, end, segments = families
        for (topic, index), partition in sorted(self.replica_manager.partitions.items()):
            log = partition.log
            if log.offline:
                continue
            labels = (topic, str(index))
            size.add_metric(labels, log.size)
            start.add_metric(labels, log.log_start_offset)
            end.add_metric(labels, log.log_end_offset)
            segments.add_metric(labels, len(log.segments))
        yield from families


class LogManagerCollector:
    """``kafka_log_logmanager_offlinelogdirectorycount`` and
    ``kafka_log_logmanager_logdirectoryoffline{logDirectory}``: Kafka's LogManager
    gauges, the log dirs that had an I/O error (their partitions offline until a restart
    with the dir repaired) and, per log dir as configured (absolute), 1 if it is one;
    likewise ``..._cordonedlogdirectorycount`` and ``..._logdirectorycordoned`` for the
    dirs ``cordoned.log.dirs`` names (KIP-1066)."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager

    def collect(self) -> Iterator[Metric]:
        offline = self.log_manager.offline_dirs
        yield GaugeMetricFamily(
            gauge("kafka.log", "LogManager", "OfflineLogDirectoryCount"),
            "Log directories offline (kafka.log:type=LogManager,"
            "name=OfflineLogDirectoryCount)", value=len(offline))
        family = GaugeMetricFamily(
            gauge("kafka.log", "LogManager", "LogDirectoryOffline"),
            "1 if the log directory is offline (kafka.log:type=LogManager,"
            "name=LogDirectoryOffline,logDirectory=...)", labels=("logDirectory",))
        for directory in self.log_manager.log_dirs:
            family.add_metric((directory,), int(directory in offline))
        yield family
        cordoned = self.log_manager.cordoned_dirs
        yield GaugeMetricFamily(
            gauge("kafka.log", "LogManager", "CordonedLogDirectoryCount"),
            "Log directories cordoned (kafka.log:type=LogManager,"
            "name=CordonedLogDirectoryCount)", value=len(cordoned))
        family = GaugeMetricFamily(
            gauge("kafka.log", "LogManager", "LogDirectoryCordoned"),
            "1 if the log directory is cordoned (kafka.log:type=LogManager,"
            "name=LogDirectoryCordoned,logDirectory=...)", labels=("logDirectory",))
        for directory in self.log_manager.log_dirs:
            family.add_metric((directory,), int(directory in cordoned))
        yield family


class LogFlushStatsCollector:
    """``kafka_log_logflushstats_logflushrateandtimems{quantile}``, ``_count``, ``_sum``:
    Kafka's segment flush timer as the exporter's histogram rules name a bean with no
    further key (its rate is ``rate()`` of ``_count``)."""

    def __init__(self, stats: LogFlushStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        count, total, recent = self.stats.snapshot()
        family = SummaryMetricFamily(
            histogram("kafka.log", "LogFlushStats", "LogFlushRateAndTimeMs"),
            "Log segments' fsyncs (partitions' and the metadata log's), in milliseconds "
            "(kafka.log:type=LogFlushStats,"
            f"name=LogFlushRateAndTimeMs); quantiles of the last {RESERVOIR}")
        for label, quantile in QUANTILES:
            family.add_sample(family.name, {"quantile": label},
                              yammer_quantile(recent, quantile))
        family.add_sample(family.name + "_count", {}, count)
        family.add_sample(family.name + "_sum", {}, total)
        yield family
