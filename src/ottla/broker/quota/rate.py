"""Kafka's ``Rate`` over a ``WindowedSum`` (``org.apache.kafka.common.metrics.stats``): a
value per second, measured over a fixed number of sampling windows, as client quotas
measure what a client sends or fetches.

A sample covers ``window_ms`` from its first record; ``samples`` of them are kept, plus one
that may overlap the start of the measured span (Kafka's ring of ``samples + 1``). A sample
with no record for ``samples * window_ms`` is reset. The rate is the sum of the samples
over the time since the oldest one began, but never over less than ``samples - 1`` whole
windows: a first burst is not an infinite rate (with the defaults, 11 windows of 1 s, a
client is measured over at least 10 s). Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations


class Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


def _truncated_div(a: int, b: int) -> int:
    """Java's ``long / long``: towards zero."""
    return a // b if a >= 0 else -(-a // b)


class Rate:
    """A rate per second of the values recorded (Kafka's ``Rate`` of a ``WindowedSum``)."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        """``SampledStat.record``: into the current sample, or a new one once the current
        is ``window_ms`` old (reusing the oldest slot of the ring)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        """``purgeObsoleteSamples``: reset the samples with no record for the whole span."""
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

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
