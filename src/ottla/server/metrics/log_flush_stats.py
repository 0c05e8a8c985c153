"""Kafka's LogFlushStats: how often partition logs' segments are fsynced and how long
each fsync takes (the Yammer timer ``kafka.log:type=LogFlushStats,
name=LogFlushRateAndTimeMs``, which Kafka's ``LogSegment.flush`` times).

The storage layer reads no clock for it: a log hands each segment flush to the timer its
log manager gave it (``LogFlushStats.time``), which the node sets when it serves metrics.
Segments are flushed on the event loop (``flush.ms``, ``flush.messages``, shutdown) and
on worker threads (the segments a roll leaves behind), so recording takes a lock; an
fsync costs milliseconds, the lock a fraction of a microsecond.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RESERVOIR = 1024
"""Flush times kept for the quantiles (a power of two: the ring index is a mask)."""


class LogFlushStats:
    """The count, total and last ``RESERVOIR`` times (ms) of the segment flushes."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.count = 0
        self.sum_ms = 0.0
        self._times = [0.0] * RESERVOIR

    def time(self, flush: Callable[[], None]) -> None:
        """Run ``flush`` and record how long it took, failed or not (as a Yammer timer's
        ``time`` does)."""
        start = self._clock()
        try:
            flush()
        finally:
            self.record((self._clock() - start) * 1000)

    def record(self, ms: float) -> None:
        with self._lock:
            self._times[self.count & (RESERVOIR - 1)] = ms
            self.count += 1
            self.sum_ms += ms

    def snapshot(self) -> tuple[int, float, list[float]]:
        """(count, sum in ms, the kept times sorted), consistent with each other."""
        with self._lock:
            return self.count, self.sum_ms, sorted(self._times[:min(self.count, RESERVOIR)])
