"""Kafka's ``Max`` (``org.apache.kafka.common.metrics.stats``) with its default sampling,
2 samples of 30 s: the largest value kept, NaN with none."""

from __future__ import annotations

import math

from ottla.common.stats.max import Max


def test_max_is_the_largest_value_kept_and_nan_without_any() -> None:
    highest = Max(2, 30_000)
    assert math.isnan(highest.measure(0))
    highest.record(-5, 0)  # a sample starts below any value: a negative one is a maximum
    assert highest.measure(0) == -5
    highest.record(40, 10)
    highest.record(20, 29_999)  # the same sample
    assert highest.measure(29_999) == 40
    highest.record(30, 30_000)  # a new sample
    assert highest.measure(30_000) == 40
    # The first sample's last record is samples * window old at 89.999 s: reset.
    assert highest.measure(89_999) == 30
    assert math.isnan(highest.measure(90_000))
