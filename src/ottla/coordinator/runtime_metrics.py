"""What a coordinator runtime measures of its partitions' loads, for the node to read
when its metrics are scraped: Kafka's ``partition-load-time-avg`` and ``-max`` (the
transaction coordinator's ``TransactionsPartitionLoadTime`` sensor in
``transaction-coordinator-metrics``; the group coordinator's runtime has the same
pair), each load timed from the moment the partition was taken on (loads waiting
their turn included) to its shard becoming active, recorded at its end. Kafka's
default windows (``metrics.num.samples=2`` of ``metrics.sample.window.ms=30000``).
Sans-I/O: the runtime passes the ``now_ms`` it is given.
"""

from __future__ import annotations

from ottla.common.stats.avg import Avg
from ottla.common.stats.max import Max

NUM_SAMPLES = 2
SAMPLE_WINDOW_MS = 30_000


class CoordinatorRuntimeMetrics:
    def __init__(self, samples: int = NUM_SAMPLES, window_ms: int = SAMPLE_WINDOW_MS) -> None:
        self.partition_load_time_avg = Avg(samples, window_ms)
        self.partition_load_time_max = Max(samples, window_ms)
        self.partitions_loaded = 0

    def partition_loaded(self, started_ms: int, now_ms: int) -> None:
        load_ms = max(0, now_ms - started_ms)
        self.partition_load_time_avg.record(load_ms, now_ms)
        self.partition_load_time_max.record(load_ms, now_ms)
        self.partitions_loaded += 1
