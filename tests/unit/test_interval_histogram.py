"""The coordinator runtime's latency histogram, read as Kafka's HdrHistogram wrapper
reads it: percentiles by HdrHistogram's getValueAtPercentile, over what was recorded
between the last two snapshots, a new snapshot taken by a reading more than a second
after the last."""

from __future__ import annotations

from ottla.common.stats.interval_histogram import IntervalHistogram


def test_percentiles_and_max_of_one_to_a_hundred() -> None:
    h = IntervalHistogram(60_000)
    for v in range(1, 101):
        h.record(v)
    assert [h.percentile(p, 10_000) for p in (50, 95, 99, 99.9)] == [50, 95, 99, 100]
    assert h.max(10_000) == 100 and h.count(10_000) == 100


def test_an_empty_histogram_reads_zero() -> None:
    h = IntervalHistogram(60_000)
    assert (h.max(0), h.percentile(99, 0), h.count(0)) == (0, 0, 0)


def test_each_snapshot_holds_what_was_recorded_since_the_one_before() -> None:
    h = IntervalHistogram(60_000)
    h.record(7)
    assert h.max(10_000) == 7
    h.record(900)
    assert h.max(10_500) == 7  # the snapshot is half a second old: kept
    assert h.max(11_001) == 900  # over a second: what came since
    assert h.max(12_002) == 0  # nothing since


def test_values_are_clamped_to_the_trackable_range() -> None:
    h = IntervalHistogram(60_000)
    h.record(-5)
    h.record(3_600_000)
    assert (h.percentile(50, 5_000), h.max(5_000)) == (0, 60_000)
