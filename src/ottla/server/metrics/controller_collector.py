"""The controller role's metrics, read when scraped: the gauges of
``kafka.controller:type=KafkaController`` that Kafka's QuorumControllerMetrics (whether
this controller is active, how far it has applied the metadata log) and
ControllerMetadataMetrics (counts over the committed metadata image) give every
controller, and the histogram of how long its operations take to run
(``kafka.controller:type=ControllerEventManager,name=EventQueueProcessingTimeMs``)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from ottla.metadata.image import MetadataImage
from ottla.metadata.loader import MetadataLoader
from ottla.server.controller_driver import ControllerDriver
from ottla.server.metrics.jmx_names import QUANTILES, gauge, histogram, meter, yammer_quantile
from ottla.server.metrics.log_flush_stats import RESERVOIR


class KafkaControllerCollector:
    """``kafka_controller_kafkacontroller_*`` of a node with the controller role.
    ``image`` is the node's published image (committed records, as Kafka's metrics
    publisher sees them); the offsets are the controller's own."""

    def __init__(self, driver: ControllerDriver, image: MetadataImage,
                 loader: MetadataLoader | None = None) -> None:
        self.driver = driver
        self.image = image
        self.loader = loader
        """What applies the committed records to ``image``: it counts the elections of
        ``kafka.controller:type=ControllerStats`` (None: not served)."""

    def collect(self) -> Iterator[Metric]:
        image = self.image
        partitions = offline = imbalanced = 0
        for topic in image.topics_by_name.values():
            for registration in topic.partitions.values():
                partitions += 1
                offline += registration.leader < 0
                # Kafka's hasPreferredLeader: led by the first replica.
                imbalanced += not registration.replicas or \
                    registration.leader != registration.replicas[0]
        fenced = sum(1 for b in image.brokers.values() if b.fenced)
        offsets = self.driver.offsets
        for name, value, doc in (
                ("ActiveControllerCount", int(self.driver.is_active),
                 "1 on the active controller, 0 on the others"),
                ("GlobalTopicCount", len(image.topics_by_name), "Topics in the cluster"),
                ("GlobalPartitionCount", partitions, "Partitions in the cluster"),
                ("OfflinePartitionsCount", offline, "Partitions without a leader"),
                ("PreferredReplicaImbalanceCount", imbalanced,
                 "Partitions not led by their preferred (first) replica"),
                ("FencedBrokerCount", fenced, "Registered brokers that are fenced"),
                ("ActiveBrokerCount", len(image.brokers) - fenced,
                 "Registered brokers that are not fenced"),
                ("LastAppliedRecordOffset", offsets.replayed_end - 1,
                 "The offset of the last metadata record this controller applied"),
                ("LastCommittedRecordOffset", offsets.committed_end - 1,
                 "The offset of the last committed metadata record this controller "
                 "applied"),
                ("LastAppliedRecordTimestamp", offsets.last_applied_timestamp,
                 "The timestamp of the last metadata record this controller applied"),
                # As Kafka's, now less that timestamp (-1 before any: now + 1).
                ("LastAppliedRecordLagMs", self.driver.now_ms() - offsets.last_applied_timestamp,
                 "The milliseconds since the last metadata record this controller applied "
                 "was appended"),
                ("EventQueueOperationsStartedCount", self.driver.operations_started,
                 "Controller operations run"),
                ("NewActiveControllersCount", self.driver.new_active_controllers,
                 "Metadata quorum epochs this controller saw a leader of")):
            yield GaugeMetricFamily(gauge("kafka.controller", "KafkaController", name),
                                    f"{doc} (kafka.controller:type=KafkaController,"
                                    f"name={name})", value=value)
        if self.loader is not None:
            for mbean, count, doc in (
                    ("UncleanLeaderElectionsPerSec", self.loader.unclean_elections,
                     "Leaders elected uncleanly"),
                    ("ElectionFromEligibleLeaderReplicasPerSec", self.loader.elr_elections,
                     "Leaders elected from the eligible leader replicas")):
                yield CounterMetricFamily(meter("kafka.controller", "ControllerStats", mbean),
                                          f"{doc} (kafka.controller:type=ControllerStats,"
                                          f"name={mbean} Count)", value=count)
        yield self._processing_time()

    def _processing_time(self) -> SummaryMetricFamily:
        name = "EventQueueProcessingTimeMs"
        count, total, recent = self.driver.processing_time_ms.snapshot()
        family = SummaryMetricFamily(
            histogram("kafka.controller", "ControllerEventManager", name),
            "Milliseconds each controller operation took to run and append its records "
            f"(kafka.controller:type=ControllerEventManager,name={name}); quantiles of "
            f"the last {RESERVOIR}")
        for label, quantile in QUANTILES:
            family.add_sample(family.name, {"quantile": label},
                              yammer_quantile(recent, quantile))
        family.add_sample(family.name + "_count", {}, count)
        family.add_sample(family.name + "_sum", {}, total)
        return family
