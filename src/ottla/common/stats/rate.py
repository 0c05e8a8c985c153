"""Kafka's ``Rate`` over a ``WindowedSum`` (``org.apache.kafka.common.metrics.stats``): a
value per second, measured over a fixed number of sampling windows, as client quotas
measure what a client sends or fetches.

The samples are a ``SampledStat``'s (``samples`` windows of ``window_ms``). The rate is
the sum of the samples over the time since the oldest one began, but never over less than
``samples - 1`` whole windows: a first burst is not an infinite rate (with the defaults, 11
windows of 1 s, a client is measured over at least 10 s). Sans-I/O: callers pass
``now_ms``.
"""

from __future__ import annotations

from ottla.common.stats.sampled_stat import Sample, SampledStat


def _truncated_div(a: int, b: int) -> int:
    """Java's ``long / long``: towards zero."""
    return a // b if a >= 0 else -(-a // b)


class Rate(SampledStat):
    """A rate per second of the values recorded (Kafka's ``Rate`` of a ``WindowedSum``)."""

    __slots__ = ()

    def window_size(self, now_ms: int) -> int:
        """``Rate.windowSize``: the milliseconds the rate divides by."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(Sample(now_ms))
        oldest = min(s.start_ms for s in self._samples)
        elapsed = now_ms - oldest
        full_windows = _truncated_div(elapsed, self.window_ms)
        min_full_windows = self.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)
