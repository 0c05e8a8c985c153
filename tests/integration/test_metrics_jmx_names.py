"""Ottla's metric names checked against Apache Kafka 4.4's own MBeans: a Kafka node and an
Ottla node under the same traffic, Kafka's beans listed by its JmxTool, Ottla's /metrics
scraped, and each of Ottla's series mapped back to the bean and attribute the JMX
exporter's rules would have made it from (tests/kafka_ref/jmx_names.py). A misspelt name
in one of the groups dashboards read is a series no Kafka bean makes, and fails here."""

from __future__ import annotations

from pathlib import Path

from tests.kafka_ref.jmx_names import Identity, compare, kafka_identities, ottla_names
from tests.kafka_tools import require_kafka

IMPORTANT: dict[str, tuple[str, str]] = {
    # The Prometheus prefix of each group dashboards read -> its bean's domain and type.
    "kafka_server_brokertopicmetrics_": ("kafka.server", "BrokerTopicMetrics"),
    "kafka_network_requestmetrics_": ("kafka.network", "RequestMetrics"),
    "kafka_network_socketserver_": ("kafka.network", "SocketServer"),
    "kafka_server_replicamanager_": ("kafka.server", "ReplicaManager"),
    "kafka_server_replicafetchermanager_": ("kafka.server", "ReplicaFetcherManager"),
    "kafka_controller_kafkacontroller_": ("kafka.controller", "KafkaController"),
    "kafka_coordinator_group_groupmetadatamanager_": ("kafka.coordinator.group",
                                                      "GroupMetadataManager"),
    "kafka_server_group_coordinator_metrics_": ("kafka.server", "group-coordinator-metrics"),
    "kafka_server_share_coordinator_metrics_": ("kafka.server", "share-coordinator-metrics"),
    "kafka_server_transaction_coordinator_metrics_": ("kafka.server",
                                                      "transaction-coordinator-metrics"),
    "kafka_server_raft_metrics_": ("kafka.server", "raft-metrics"),
    "kafka_server_broker_metadata_metrics_": ("kafka.server", "broker-metadata-metrics"),
    "kafka_server_brokermetadatalistener_": ("kafka.server", "BrokerMetadataListener"),
    "kafka_log_log_": ("kafka.log", "Log"),
    "kafka_log_logflushstats_": ("kafka.log", "LogFlushStats"),
    "kafka_server_socket_server_metrics_": ("kafka.server", "socket-server-metrics"),
    "kafka_server_quota_": ("kafka.server", "Produce"),
    # The quota types' own beans (queue-size, exempt-request-time).
    "kafka_server_produce_": ("kafka.server", "Produce"),
    "kafka_server_fetch_": ("kafka.server", "Fetch"),
    "kafka_server_request_": ("kafka.server", "Request"),
    "kafka_server_controllermutation_": ("kafka.server", "ControllerMutation"),
    "kafka_controller_controllerstats_": ("kafka.controller", "ControllerStats"),
    "kafka_cluster_partition_": ("kafka.cluster", "Partition"),
    "kafka_server_delayedoperationpurgatory_": ("kafka.server", "DelayedOperationPurgatory"),
    "kafka_log_logmanager_": ("kafka.log", "LogManager"),
    "kafka_server_kafkaserver_": ("kafka.server", "KafkaServer"),
    "kafka_server_fetchsessioncache_": ("kafka.server", "FetchSessionCache"),
    "kafka_controller_controllereventmanager_": ("kafka.controller",
                                                 "ControllerEventManager"),
    "kafka_log_logcleaner_": ("kafka.log", "LogCleaner"),
    "kafka_log_logcleanermanager_": ("kafka.log", "LogCleanerManager"),
}


def test_every_ottla_name_of_the_important_groups_is_one_of_kafkas(tmp_path: Path) -> None:
    require_kafka()
    kafka = kafka_identities(tmp_path / "kafka")
    ottla = ottla_names(tmp_path / "ottla")
    result = compare(kafka, ottla)

    misspelt = sorted(name for name in result.only_ottla if name.startswith(tuple(IMPORTANT)))
    assert not misspelt, f"series no Kafka 4.4 bean is named as: {misspelt}"
    # Every group is served and matched, so the check above is not vacuous.
    matched_types = {(i.domain, i.type) for i in result.both}
    for prefix, bean in IMPORTANT.items():
        assert any(name.startswith(prefix) for name in ottla), f"Ottla serves no {prefix}*"
        assert bean in matched_types, f"none of Ottla's {prefix}* is one of Kafka's {bean}"
    # The names dashboards chart first, as Kafka registers them.
    for identity in (
            Identity("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec", group=False),
            Identity("kafka.network", "RequestMetrics", "TotalTimeMs", group=False),
            Identity("kafka.server", "ReplicaManager", "UnderReplicatedPartitions", group=False),
            Identity("kafka.controller", "KafkaController", "ActiveControllerCount", group=False),
            Identity("kafka.server", "raft-metrics", "current-leader", group=True),
            Identity("kafka.server", "Produce", "queue-size", group=True),
            Identity("kafka.server", "Request", "exempt-request-time", group=True)):
        assert identity in result.both, f"{identity} is not served under Kafka's name"
