"""Kafka's ``Max`` (``org.apache.kafka.common.metrics.stats``) with its default sampling,
2 samples of 30 s: the largest value kept, NaN with none; and its ``TimeRatio`` (KRaft's
``poll-idle-ratio-avg``)."""

from __future__ import annotations

import math
import re

import pytest

from ottla.common.stats.max import Max
from ottla.common.stats.time_ratio import TimeRatio


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


def test_time_ratio_is_the_recorded_share_of_the_time_since_the_last_read() -> None:
    # Kafka's TimeRatioTest.testRatio: the first recording only starts the interval.
    ratio = TimeRatio(1.0)
    assert ratio.measure() == 1.0  # nothing recorded: the default
    ratio.record(0.0, 0)
    ratio.record(10, 10)
    ratio.record(0, 20)
    assert ratio.measure() == 0.5
    ratio.record(10, 30)
    ratio.record(0, 70)
    assert ratio.measure() == 0.2


def test_time_ratio_measures_up_to_the_last_recording_only() -> None:
    # Kafka's testRatioMisalignedWindow: a read between recordings counts no time that
    # nothing recorded, and the next interval starts at the last recording.
    ratio = TimeRatio(1.0)
    ratio.record(0.0, 0)
    ratio.record(10, 10)
    assert ratio.measure() == 1.0
    assert ratio.measure() == 1.0  # an empty interval: the default
    ratio.record(5, 20)
    assert ratio.measure() == 0.5
    message = "Invalid ratio: value 1.5 is not between 0 and 1."
    with pytest.raises(ValueError, match=re.escape(message)):
        TimeRatio(1.5)
