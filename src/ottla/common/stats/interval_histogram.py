"""A latency histogram read as Kafka's coordinator runtime reads its own (its
``HdrHistogram`` over an HdrHistogram ``Recorder``): a reading returns the values recorded
between the last two snapshots, and takes a new snapshot when the last one is more than
``max_snapshot_age_ms`` old. So each scrape sees what was recorded since the one before
(if that was over a second ago). Values are whole milliseconds clamped to
[0, ``highest_trackable``], counted per value, so memory is bounded by the range whether
or not anyone reads them. Sans-I/O: readings take the ``now_ms`` they are given."""

from __future__ import annotations

from collections import Counter

DEFAULT_MAX_SNAPSHOT_AGE_MS = 1000


class IntervalHistogram:
    def __init__(self, highest_trackable: int,
                 max_snapshot_age_ms: int = DEFAULT_MAX_SNAPSHOT_AGE_MS) -> None:
        self.highest_trackable = highest_trackable
        self.max_snapshot_age_ms = max_snapshot_age_ms
        self._recording: Counter[int] = Counter()
        self._snapshot: list[tuple[int, int]] = []
        """(value, count), ascending."""
        self._snapshot_ms: int | None = None

    def record(self, value: int) -> None:
        self._recording[min(max(0, value), self.highest_trackable)] += 1

    def _latest(self, now_ms: int) -> list[tuple[int, int]]:
        if self._snapshot_ms is None or self._snapshot_ms < now_ms - self.max_snapshot_age_ms:
            self._snapshot = sorted(self._recording.items())
            self._recording = Counter()
            self._snapshot_ms = now_ms
        return self._snapshot

    def count(self, now_ms: int) -> int:
        return sum(n for _, n in self._latest(now_ms))

    def max(self, now_ms: int) -> int:
        snapshot = self._latest(now_ms)
        return snapshot[-1][0] if snapshot else 0

    def percentile(self, percentile: float, now_ms: int) -> int:
        """HdrHistogram's getValueAtPercentile: the least value at or below which
        ``percentile`` % of the snapshot's values lie (rounded to the nearest count,
        at least one); 0 when the snapshot is empty."""
        snapshot = self._latest(now_ms)
        total = sum(n for _, n in snapshot)
        if total == 0:
            return 0
        wanted = max(1, int(percentile / 100.0 * total + 0.5))
        seen = 0
        for value, n in snapshot:
            seen += n
            if seen >= wanted:
                return value
        return snapshot[-1][0]
