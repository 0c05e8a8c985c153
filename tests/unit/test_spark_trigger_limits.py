"""The streaming source's trigger limits, as Spark's Kafka source has them:
minOffsetsPerTrigger with maxTriggerDelay (held back until enough records or the delay),
parsed like Spark's options (time strings, min not above max)."""

from __future__ import annotations

import pytest

from ottla.spark.offset_ranges import TriggerGate
from ottla.spark.options import OptionError, parse_source

BASE = {"kafka.bootstrap.servers": "x", "subscribe": "t"}
A, B = ("t", 0), ("t", 1)


def test_the_first_trigger_runs_whatever_it_has() -> None:
    gate = TriggerGate(min_records=100, max_delay_ms=60_000)
    assert not gate.holds_back({A: 0}, {A: 3}, now_ms=1_000_000)


def test_fewer_new_records_than_the_minimum_wait_for_more() -> None:
    gate = TriggerGate(min_records=100, max_delay_ms=60_000)
    assert not gate.holds_back({A: 0}, {A: 3}, now_ms=1_000_000)
    assert gate.holds_back({A: 3, B: 0}, {A: 50, B: 49}, now_ms=1_001_000)  # 96 new
    assert not gate.holds_back({A: 3, B: 0}, {A: 50, B: 53}, now_ms=1_002_000)  # 100 new
    assert gate.holds_back({A: 50, B: 53}, {A: 51, B: 53}, now_ms=1_003_000)


def test_the_delay_runs_a_batch_with_what_there_is() -> None:
    gate = TriggerGate(min_records=100, max_delay_ms=5_000)
    assert not gate.holds_back({A: 0}, {A: 1}, now_ms=10_000)
    assert gate.holds_back({A: 1}, {A: 2}, now_ms=14_999)
    assert not gate.holds_back({A: 1}, {A: 2}, now_ms=15_000)
    assert gate.holds_back({A: 2}, {A: 3}, now_ms=15_001)  # the delay counts from then


def test_a_new_partition_counts_from_zero() -> None:
    gate = TriggerGate(min_records=10, max_delay_ms=60_000, last_trigger_ms=1)
    assert not gate.holds_back({A: 5}, {A: 5, B: 10}, now_ms=2)


@pytest.mark.parametrize(("text", "ms"), [
    ("15m", 900_000), ("30s", 30_000), ("250", 250), ("100ms", 100), ("1h", 3_600_000),
    ("2min", 120_000), ("1d", 86_400_000), (" 5S ", 5_000), ("0", 0)])
def test_max_trigger_delay_reads_spark_time_strings(text: str, ms: int) -> None:
    options = parse_source({**BASE, "minOffsetsPerTrigger": "10", "maxTriggerDelay": text},
                           streaming=True)
    assert options.max_trigger_delay_ms == ms
    assert options.min_offsets_per_trigger == 10


def test_the_default_delay_is_fifteen_minutes() -> None:
    options = parse_source(BASE, streaming=True)
    assert options.max_trigger_delay_ms == 15 * 60_000
    assert options.min_offsets_per_trigger is None


@pytest.mark.parametrize(("options", "message"), [
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"maxTriggerDelay": "5 weeks"}, "maxTriggerDelay"),
    ({"maxTriggerDelay": "-1s"}, "negative"),
    ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger"),
    ({"minOffsetsPerTrigger": "ten"}, "minOffsetsPerTrigger"),
    ({"minOffsetsPerTrigger": "200", "maxOffsetsPerTrigger": "100"},
     r"minOffsetsPerTrigger \(200\) is higher than the maxOffsetsPerTrigger \(100\)"),
])
def test_bad_trigger_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source({**BASE, **options}, streaming=True)
