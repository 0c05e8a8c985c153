"""Kafka's ``SampledStat`` (``org.apache.kafka.common.metrics.stats``): values recorded
into a ring of samples, each covering ``window_ms`` from its first record, that the
measured stats (``Rate``, ``Avg``) combine.

``samples`` samples are kept, plus one that may overlap the start of the measured span
(Kafka's ring of ``samples + 1``). A sample with no record for ``samples * window_ms`` is
reset when measured. Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations


class Sample:
    __slots__ = ("event_count", "initial_value", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int, initial_value: float = 0.0) -> None:
        self.initial_value = initial_value
        self.value = initial_value
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = self.initial_value
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledStat:
    """The ring of samples and its recording; subclasses say what a measure combines
    and, if not a sum, how a sample takes a value (``_update``, from ``initial_value``)."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    initial_value = 0.0

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[Sample] = []
        self._current = 0

    def _current_sample(self, now_ms: int) -> Sample:
        if not self._samples:
            self._samples.append(Sample(now_ms, self.initial_value))
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        """``SampledStat.record``: into the current sample, or a new one once the current
        is ``window_ms`` old (reusing the oldest slot of the ring)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = Sample(now_ms, self.initial_value)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _update(self, sample: Sample, value: float) -> None:
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        """``purgeObsoleteSamples``: reset the samples with no record for the whole span."""
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)
