"""``kafka.server:type=KafkaServer``: ``BrokerState``, where the broker is in its lifecycle
(Kafka's BrokerState numbers: 1 starting, 2 recovery, 3 running, 6 pending controlled
shutdown, 7 shutting down), the gauge Kafka dashboards show per broker; and, as Kafka's
``LinuxIoMetricsCollector`` registers them on Linux, the process's I/O counters from
``/proc/self/io`` (``linux-disk-read-bytes``, ``linux-disk-write-bytes``: the bytes the
process made the storage read and write, which dashboards chart as disk throughput)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.server.broker_lifecycle import BrokerState
from ottla.server.metrics.jmx_names import gauge

PROC_SELF_IO = Path("/proc/self/io")
LINUX_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes",
                   "cancelled_write_bytes")
"""The fields of ``/proc/self/io`` Kafka serves, each as ``linux-disk-<field, dashed>``."""


def parse_linux_io(text: str) -> dict[str, int]:
    """``/proc/<pid>/io``'s ``field: value`` lines, those of ``LINUX_IO_FIELDS``."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in LINUX_IO_FIELDS and value.strip().isdigit():
            found[key] = int(value)
    return found


def read_proc_self_io() -> str | None:
    """The process's ``/proc/self/io``, None where there is none (not Linux) or it cannot
    be read (as Kafka, which then registers no gauge)."""
    try:
        return PROC_SELF_IO.read_text(encoding="ascii")
    except OSError:
        return None


class KafkaServerCollector:
    """``kafka_server_kafkaserver_*`` of a node with the broker role: ``brokerstate``
    (``state`` reads its lifecycle: NOT_RUNNING, 0, before the lifecycle starts) and the
    ``linux_disk_*`` gauges, read at scrape time from ``read_io``'s text."""

    def __init__(self, state: Callable[[], BrokerState],
                 read_io: Callable[[], str | None] = read_proc_self_io) -> None:
        self.state = state
        self.read_io = read_io

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(gauge("kafka.server", "KafkaServer", "BrokerState"),
                                "The broker's state (kafka.server:type=KafkaServer,"
                                "name=BrokerState)", value=int(self.state()))
        text = self.read_io()
        if text is None:
            return
        for field, value in parse_linux_io(text).items():
            name = "linux-disk-" + field.replace("_", "-")
            yield GaugeMetricFamily(
                gauge("kafka.server", "KafkaServer", name),
                f"The process's {field} of /proc/self/io "
                f"(kafka.server:type=KafkaServer,name={name})", value=value)
