"""Kafka's ``Max`` (``org.apache.kafka.common.metrics.stats``): the largest value recorded
in the samples not yet expired, NaN when there are none (a sample starts at -inf, so a
negative value is a maximum too). Sans-I/O: callers pass ``now_ms``."""

from __future__ import annotations

import math

from ottla.common.stats.sampled_stat import Sample, SampledStat


class Max(SampledStat):
    __slots__ = ()

    initial_value = -math.inf

    def _update(self, sample: Sample, value: float) -> None:
        sample.value = max(sample.value, value)

    def measure(self, now_ms: int) -> float:
        """The maximum at ``now_ms`` (Kafka's ``Max.combine`` after the purge)."""
        self._purge(now_ms)
        if not any(s.event_count for s in self._samples):
            return math.nan
        return max(s.value for s in self._samples)
