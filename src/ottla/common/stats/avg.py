"""Kafka's ``Avg`` (``org.apache.kafka.common.metrics.stats``): the mean of the values
recorded in the samples not yet expired, NaN when there are none. A quota manager keeps
one per client for its ``throttle-time`` metric, fed the throttle time of each request
it throttled, so the metric says how hard a client was held back lately (with Kafka's
default ``metrics.num.samples=2`` of ``metrics.sample.window.ms=30000``, over the last
30 to 60 s). Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations

import math

from ottla.common.stats.sampled_stat import SampledStat


class Avg(SampledStat):
    __slots__ = ()

    def measure(self, now_ms: int) -> float:
        """The mean at ``now_ms`` (Kafka's ``Avg.combine`` after the purge)."""
        self._purge(now_ms)
        count = sum(s.event_count for s in self._samples)
        if count == 0:
            return math.nan
        return sum(s.value for s in self._samples) / count
