"""Kafka's ``TimeRatio`` (``org.apache.kafka.server.metrics``): the share of the time
between two reads that recorded durations (a thread's idle spells) cover. Each read
starts the next interval, as Kafka's ``measure`` does, so the value is over the time since
the previous read: KRaft's ``poll-idle-ratio-avg`` is this, fed the Raft replica's idle
spells. Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations


class TimeRatio:
    __slots__ = ("_interval_start_ms", "_last_recorded_ms", "_total_ms", "default")

    def __init__(self, default: float) -> None:
        if not 0.0 <= default <= 1.0:
            raise ValueError(f"Invalid ratio: value {default} is not between 0 and 1.")
        self.default = default
        """The value before anything was recorded, or over an empty interval."""
        self._interval_start_ms = -1.0
        self._last_recorded_ms = -1.0
        self._total_ms = 0.0

    def record(self, duration_ms: float, now_ms: float) -> None:
        """A spell of ``duration_ms`` that ended at ``now_ms``. The first one only starts
        the interval: it began before the interval did."""
        if self._interval_start_ms < 0:
            self._interval_start_ms = now_ms
        else:
            self._total_ms += duration_ms
            self._last_recorded_ms = now_ms

    def measure(self) -> float:
        """The recorded time over the interval from its start to the last recording
        (at most 1), and the next interval starts there."""
        if self._last_recorded_ms < 0:
            return self.default
        interval_ms = max(self._last_recorded_ms - self._interval_start_ms, 0.0)
        ratio = self.default if interval_ms == 0 else min(self._total_ms / interval_ms, 1.0)
        self._interval_start_ms = self._last_recorded_ms
        self._total_ms = 0.0
        return ratio
