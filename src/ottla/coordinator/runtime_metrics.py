"""What a coordinator runtime measures, for the node to read when its metrics are
scraped. Kafka's ``partition-load-time-avg`` and ``-max`` (the transaction coordinator's
``TransactionsPartitionLoadTime`` sensor in ``transaction-coordinator-metrics``; the
group and share coordinators' runtimes have the same pair): each load timed from the
moment the partition was taken on (loads waiting their turn included) to its shard
becoming active, recorded at its end, in Kafka's default windows
(``metrics.num.samples=2`` of ``metrics.sample.window.ms=30000``). And the runtime's
``event-purgatory-time-ms`` histogram. Sans-I/O: the runtime passes the times it is
given.
"""

from __future__ import annotations

from ottla.common.stats.avg import Avg
from ottla.common.stats.interval_histogram import IntervalHistogram
from ottla.common.stats.max import Max

NUM_SAMPLES = 2
SAMPLE_WINDOW_MS = 30_000
MAX_LATENCY_MS = 60_000
"""The highest latency Kafka's coordinator histograms track (one minute)."""


class CoordinatorRuntimeMetrics:
    def __init__(self, samples: int = NUM_SAMPLES, window_ms: int = SAMPLE_WINDOW_MS) -> None:
        self.partition_load_time_avg = Avg(samples, window_ms)
        self.partition_load_time_max = Max(samples, window_ms)
        self.partitions_loaded = 0
        self.event_purgatory_time = IntervalHistogram(MAX_LATENCY_MS)
        """Kafka's ``event-purgatory-time-ms``: how long each response (of a write, or
        of a read of uncommitted state) waited for the high watermark to cover what it
        depends on, on the timers' clock."""

    def partition_loaded(self, started_ms: int, now_ms: int) -> None:
        load_ms = max(0, now_ms - started_ms)
        self.partition_load_time_avg.record(load_ms, now_ms)
        self.partition_load_time_max.record(load_ms, now_ms)
        self.partitions_loaded += 1
