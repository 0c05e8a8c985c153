"""kafka.server:type=KafkaServer's gauges: the broker state and, as Kafka's
LinuxIoMetricsCollector, /proc/self/io's counters under Kafka's ``linux-disk-*`` names."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ottla.server.broker_lifecycle import BrokerState
from ottla.server.metrics.kafka_server_collector import KafkaServerCollector

PROC_IO = """rchar: 6976
wchar: 120
syscr: 10
syscw: 3
read_bytes: 4096
write_bytes: 8192
cancelled_write_bytes: 0
"""


def scrape(collector: KafkaServerCollector) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_proc_self_io_is_served_under_kafkas_linux_disk_names() -> None:
    served = scrape(KafkaServerCollector(lambda: BrokerState.RUNNING, lambda: PROC_IO))
    assert served == {
        "kafka_server_kafkaserver_brokerstate": 3,
        "kafka_server_kafkaserver_linux_disk_rchar": 6976,
        "kafka_server_kafkaserver_linux_disk_wchar": 120,
        "kafka_server_kafkaserver_linux_disk_syscr": 10,
        "kafka_server_kafkaserver_linux_disk_syscw": 3,
        "kafka_server_kafkaserver_linux_disk_read_bytes": 4096,
        "kafka_server_kafkaserver_linux_disk_write_bytes": 8192,
        "kafka_server_kafkaserver_linux_disk_cancelled_write_bytes": 0,
    }


def test_without_proc_self_io_there_is_no_linux_disk_gauge() -> None:
    served = scrape(KafkaServerCollector(lambda: BrokerState.STARTING, lambda: None))
    assert served == {"kafka_server_kafkaserver_brokerstate": 1}
