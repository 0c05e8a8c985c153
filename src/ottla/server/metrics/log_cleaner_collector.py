"""Kafka's log cleaner gauges (``kafka.log:type=LogCleaner`` and
``kafka.log:type=LogCleanerManager``), read when scraped from the broker's cleaner: what
its last pass cost (time, how much of what it read it wrote back), how overdue the most
overdue compacted log was when it last chose one, how dirty the dirtiest log was and how
long ago it last looked for work. Served when ``log.cleaner.enable`` is on, as Kafka
creates its cleaner then only.

Not served, as nothing here is what they measure: ``max-buffer-utilization-percent``
(the key map of a pass is sized to its keys, there is no dedupe buffer to fill),
``DeadThreadCount`` (passes run on the node's worker threads; one that fails is logged
and the log is tried again, no thread dies) and ``uncleanable-partitions-count`` /
``uncleanable-bytes`` (no partition is set aside as uncleanable after a failure)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.server.metrics.jmx_names import gauge
from ottla.storage.cleaner import LogCleaner


class LogCleanerCollector:
    """``kafka_log_logcleaner_{cleaner_recopy_percent,max_clean_time_secs,
    max_compaction_delay_secs}`` and ``kafka_log_logcleanermanager_{max_dirty_percent,
    time_since_last_run_ms}``, with Kafka's units and truncations."""

    def __init__(self, cleaner: LogCleaner, now_ms: Callable[[], int]) -> None:
        self.cleaner = cleaner
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        cleaner = self.cleaner
        last = cleaner.last_stats
        for mbean_type, name, value, doc in (
                ("LogCleaner", "cleaner-recopy-percent", last.recopy_percent(),
                 "Percent of the bytes the last cleaning read that it wrote back"),
                ("LogCleaner", "max-clean-time-secs", last.elapsed_s,
                 "Seconds the last cleaning took"),
                ("LogCleaner", "max-compaction-delay-secs",
                 cleaner.max_compaction_delay_ms / 1000,
                 "Seconds past max.compaction.lag.ms of the most overdue compacted log, "
                 "when the cleaner last chose a log"),
                ("LogCleanerManager", "max-dirty-percent",
                 int(100 * cleaner.max_dirty_ratio),
                 "Percent of the dirtiest compacted log's cleanable bytes that are dirty, "
                 "when the cleaner last looked"),
                ("LogCleanerManager", "time-since-last-run-ms",
                 self.now_ms() - cleaner.last_run_ms,
                 "Milliseconds since the cleaner last looked for a log to clean")):
            yield GaugeMetricFamily(gauge("kafka.log", mbean_type, name),
                                    f"{doc} (kafka.log:type={mbean_type},name={name})",
                                    value=value)
