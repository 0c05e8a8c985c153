"""Kafka's LogCleaner and LogCleanerManager gauges from a real cleaning of a compacted log:
the dirtiest ratio and the time of the last look for work, how overdue the log was past
max.compaction.lag.ms, the last pass's time and recopy share (Kafka's truncations)."""

from __future__ import annotations

from collections.abc import Iterator

from ottla.server.metrics.log_cleaner_collector import LogCleanerCollector
from ottla.storage.cleaner import LogCleaner
from tests.unit.test_metrics import scrape, value
from tests.unit.test_retention_and_cleaner import TP, append, fill, make_log

CLEANER = "kafka_log_logcleaner_{}".format
MANAGER = "kafka_log_logcleanermanager_{}".format


def test_the_cleaner_gauges_follow_a_cleaning(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"), **{"cleanup.policy": "compact",
                                            "segment.bytes": "2000",
                                            "max.compaction.lag.ms": "10000"})
    fill(lg, 500, keys=10, seed=1, ts=1000)
    lg.roll(1000)
    append(lg, [(b"active", b"segment")], ts=1000)
    ticks: Iterator[float] = iter([5.0, 7.5])  # the pass's start and end, in seconds
    cleaner = LogCleaner(lambda: {TP: lg}, now_ms=500, clock=lambda: next(ticks))
    now = [60_000]
    collector = LogCleanerCollector(cleaner, lambda: now[0])

    before = scrape(collector)
    assert value(before, MANAGER("time_since_last_run_ms")) == 59_500  # since created
    for idle in ("cleaner_recopy_percent", "max_clean_time_secs",
                 "max_compaction_delay_secs"):
        assert value(before, CLEANER(idle)) == 0  # no pass yet, as Kafka's empty stats
    assert value(before, MANAGER("max_dirty_percent")) == 0

    chosen = cleaner.pick(now_ms=100_000)
    assert chosen is not None
    end = lg.active_segment.base_offset
    read = sum(s.size for s in lg.segments if s.base_offset < end)
    cleaner.clean(*chosen, now_ms=100_000)
    written = sum(s.size for s in lg.segments if s.base_offset < end)
    assert 0 < written < read
    now[0] = 100_250
    after = scrape(collector)
    assert value(after, MANAGER("time_since_last_run_ms")) == 250
    assert value(after, MANAGER("max_dirty_percent")) == 100  # nothing cleaned before
    # The oldest dirty batch (1000) was due at 1000 + 10000: 89 s late at 100000.
    assert value(after, CLEANER("max_compaction_delay_secs")) == 89.0
    assert value(after, CLEANER("max_clean_time_secs")) == 2.5
    assert value(after, CLEANER("cleaner_recopy_percent")) == int(100 * written / read)

    # A look that finds nothing dirty: the ratio is 0 and the run time moves, the last
    # pass's figures and the delay seen when a log was chosen stay (Kafka's lastStats).
    assert cleaner.pick(now_ms=100_500) is None
    now[0] = 100_600
    idle = scrape(collector)
    assert value(idle, MANAGER("time_since_last_run_ms")) == 100
    assert value(idle, MANAGER("max_dirty_percent")) == 0
    assert value(idle, CLEANER("max_compaction_delay_secs")) == 89.0
    assert value(idle, CLEANER("max_clean_time_secs")) == 2.5
