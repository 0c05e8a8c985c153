"""The metrics the common Kafka Grafana dashboards query, as the JMX exporter's example
KRaft rules (``jmx-exporter-kafka-kraft.yml``) name them: the facts
tests/integration/test_metrics_jmx_exporter.py checks Ottla's ``/metrics`` against.

Source: Strimzi's dashboards ``strimzi-kafka.json`` and ``strimzi-kraft.json``
(github strimzi/strimzi-kafka-operator, packaging/examples/metrics/grafana-dashboards/, commit
8541da1e336bdcda9647aeacfbc2048e57580a52, 2026-08-22): every metric their PromQL names.
Those dashboards read Strimzi's own exporter rules, so each is mapped here to the name
the example rules give the same bean (Strimzi writes ``raft-metrics`` as ``raftmetrics``,
the example rules as ``raft_metrics``...), and checked against a real Kafka 4.4 node's
scrape by the test. Left out: the Kubernetes series the dashboards join (cAdvisor's
``container_cpu_usage_seconds_total`` and ``container_memory_usage_bytes``, the kubelet's
``kubelet_volume_stats_available_bytes``), which no broker serves.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DashboardMetric:
    dashboard: str
    """``strimzi-kafka`` or ``strimzi-kraft``."""
    queried: str
    """The name in the dashboard's PromQL (Strimzi's rules)."""
    name: str | None
    """The name the example rules give the same bean's value; None if they give it none."""


def _same(dashboard: str, *names: str) -> list[DashboardMetric]:
    return [DashboardMetric(dashboard, n, n) for n in names]


def _raft(group: str, *attributes: str) -> list[DashboardMetric]:
    """Strimzi's ``kafka_server_raftmetrics_X`` is the rules' ``kafka_server_raft_metrics_X``
    (``type=raft-metrics``, the dash made an underscore; likewise raft-channel-metrics)."""
    strimzi = group.replace("_", "")
    return [DashboardMetric("strimzi-kraft", f"kafka_server_{strimzi}_{a}",
                            f"kafka_server_{group}_{a}") for a in attributes]


DASHBOARD_METRICS: tuple[DashboardMetric, ...] = (
    *_same("strimzi-kafka",
           "kafka_server_replicamanager_leadercount",
           "kafka_server_replicamanager_partitioncount",
           "kafka_server_replicamanager_underreplicatedpartitions",
           "kafka_controller_kafkacontroller_activecontrollercount",
           "kafka_controller_kafkacontroller_offlinepartitionscount",
           "kafka_controller_controllerstats_uncleanleaderelections_total",
           "kafka_cluster_partition_atminisr",
           "kafka_cluster_partition_underminisr",
           "kafka_cluster_partition_replicascount",
           "kafka_log_log_size",
           "kafka_server_brokertopicmetrics_bytesin_total",
           "kafka_server_brokertopicmetrics_bytesout_total",
           "kafka_server_brokertopicmetrics_messagesin_total",
           "kafka_server_brokertopicmetrics_totalproducerequests_total",
           "kafka_server_brokertopicmetrics_failedproducerequests_total",
           "kafka_server_brokertopicmetrics_totalfetchrequests_total",
           "kafka_server_brokertopicmetrics_failedfetchrequests_total",
           "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
           "kafka_server_kafkaserver_linux_disk_read_bytes",
           "kafka_server_kafkaserver_linux_disk_write_bytes",
           # The agent's own JVM and process collectors, not rules.
           "jvm_memory_used_bytes", "jvm_gc_collection_seconds_sum",
           "jvm_gc_collection_seconds_count", "jvm_threads_current", "process_open_fds"),
    # NetworkProcessorAvgIdlePercent is a gauge: the rules' generic ``name=(.+)><>Value``
    # rule comes before the ``Percent`` one, so its name keeps "percent" whole.
    DashboardMetric("strimzi-kafka", "kafka_network_socketserver_networkprocessoravgidle_percent",
                    "kafka_network_socketserver_networkprocessoravgidlepercent"),
    # socket-server-metrics' beans carry listener and networkProcessor keys, which the
    # rules' early ``kafka.server<type=(.+)><>([a-z-]+)`` rule folds into the name
    # (kafka_server_socket_server_metrics_listener_plaintext_networkprocessor_0_connection_count).
    DashboardMetric("strimzi-kafka", "kafka_server_socket_server_metrics_connection_count",
                    None),
    *_raft("raft_metrics", "append_records_rate", "fetch_records_rate",
           "commit_latency_avg", "current_leader", "current_vote", "current_epoch",
           "high_watermark", "log_end_offset"),
    # Strimzi's rule makes the string a ``current_state`` label; the example rule a ``state``
    # label (its ``_info`` name loses the suffix in the 1.x agent's Prometheus model).
    DashboardMetric("strimzi-kraft", "kafka_server_raftmetrics_current_state",
                    "kafka_server_raft_metrics_current_state"),
    *_raft("raft_channel_metrics", "incoming_byte_total", "outgoing_byte_total",
           "request_total", "response_total"),
)

NO_JVM = "Ottla is a Python process: there is no JVM to measure"
NOT_YET = ("not served yet: the metadata quorum's client (ottla.server.raft_driver's "
           "AsyncClient) counts no bytes or requests; Kafka's are its NetworkClient's selector "
           "metrics")
NOT_IN_OTTLA: dict[str, str] = {
    # Name -> why Ottla's /metrics lacks it (docs/observability.md lists them too).
    "jvm_memory_used_bytes": NO_JVM,
    "jvm_gc_collection_seconds_sum": NO_JVM,
    "jvm_gc_collection_seconds_count": NO_JVM,
    "jvm_threads_current": NO_JVM,
    "kafka_server_raft_channel_metrics_incoming_byte_total": NOT_YET,
    "kafka_server_raft_channel_metrics_outgoing_byte_total": NOT_YET,
    "kafka_server_raft_channel_metrics_request_total": NOT_YET,
    "kafka_server_raft_channel_metrics_response_total": NOT_YET,
}
