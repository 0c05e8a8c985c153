"""Kafka's LogFlushStats: how often logs' segments are fsynced and how long each fsync
takes (the Yammer timer ``kafka.log:type=LogFlushStats, name=LogFlushRateAndTimeMs``,
which Kafka's ``LogSegment.flush`` times, the metadata log's segments included).

The storage layer reads no clock for it: a log hands each segment flush to the timer its
log manager gave it (``LogFlushStats.time``), which the node sets when it serves metrics,
as it sets the Raft driver's for the metadata log. Segments are flushed on the event
loop (``flush.ms``, ``flush.messages``, shutdown) and on worker threads (the segments a
roll leaves behind, the metadata log's fsyncs), so recording takes a lock; an fsync
costs milliseconds, the lock a fraction of a microsecond.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RESERVOIR = 1024
"""Values kept for the quantiles (a power of two: the ring index is a mask)."""


class Reservoir:
    """A Yammer histogram as the exporter serves it: the count and sum of the values
    recorded and the last ``RESERVOIR`` of them for the quantiles (Kafka keeps 1028
    biased to the last five minutes). Recording takes a lock: worker threads record
    too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.total = 0.0
        self._values = [0.0] * RESERVOIR

    def record(self, value: float) -> None:
        with self._lock:
            self._values[self.count & (RESERVOIR - 1)] = value
            self.count += 1
            self.total += value

    def snapshot(self) -> tuple[int, float, list[float]]:
        """(count, sum, the kept values sorted), consistent with each other."""
        with self._lock:
            return self.count, self.total, sorted(self._values[:min(self.count, RESERVOIR)])


class LogFlushStats(Reservoir):
    """The count, total and last ``RESERVOIR`` times (ms) of the segment flushes."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__()
        self._clock = clock

    def time(self, flush: Callable[[], None]) -> None:
        """Run ``flush`` and record how long it took, failed or not (as a Yammer timer's
        ``time`` does)."""
        start = self._clock()
        try:
            flush()
        finally:
            self.record((self._clock() - start) * 1000)
