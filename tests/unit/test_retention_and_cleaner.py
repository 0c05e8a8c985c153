"""Retention by time and size, and compaction by the log cleaner, with real files:
what is deleted, what is kept, and what a crash in the middle of a swap leaves."""

from __future__ import annotations

import os
import random

import pytest

from ottla.protocol.records import build_batch, decode_records, read_header, scan_batches
from ottla.storage.cleaner import LogCleaner
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager

TP = ("t", 0)


def make_log(path: str, clean: bool = False, **configs: str) -> Log:
    return Log(path, "t", 0, LogConfig.resolve(configs), now_ms=1000, clean_shutdown=clean)


def append(lg: Log, records: list[tuple[bytes | None, bytes | None]], ts: int) -> None:
    batch = bytearray(build_batch(records, timestamp=ts))
    lg.append_as_leader(batch, read_header(batch), 0, now_ms=ts)
    lg.high_watermark = lg.log_end_offset  # what the partition does on a single replica


def records_of(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 30)
        if info.records is None:
            break
        data = info.records.read()
        for pos, header in scan_batches(data):
            out += [(r.offset, r.key, r.value) for r in decode_records(data, pos, header)
                    if r.offset >= offset]
            offset = header.next_offset
    return out


# --- retention ------------------------------------------------------------------------------

def test_retention_by_time_deletes_the_oldest_segments(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "300", "retention.ms": "10000"})
    for i in range(30):
        append(lg, [(None, b"x" * 60)], ts=1000 + i * 1000)
    segments = len(lg.segments)
    assert segments > 5
    now = 1000 + 29 * 1000 + 5000  # batches older than now - 10 s may go
    doomed = lg.delete_old_segments(now)
    assert doomed and all(s.largest_timestamp < now - 10_000 for s in doomed)
    assert all(s.largest_timestamp >= now - 10_000 for s in lg.segments[:-1])
    assert lg.log_start_offset == lg.segments[0].base_offset
    assert all(os.path.exists(s.path + ".deleted") for s in doomed)
    # Everything expired: as Kafka's UnifiedLog.deleteSegments, the log rolls a new empty
    # segment and deletes every other one, the active one included; log start = log end.
    lg.delete_old_segments(now + 1_000_000)
    assert len(lg.segments) == 1 and lg.active_segment.size == 0
    assert lg.log_start_offset == lg.log_end_offset == 30
    assert records_of(lg) == []
    # An empty active segment is never deleted (nothing to roll over to).
    assert lg.delete_old_segments(now + 2_000_000) == []
    append(lg, [(None, b"after")], ts=now + 2_000_000)
    assert [o for o, _, _ in records_of(lg)] == [30]


def test_retention_by_time_takes_a_single_expired_segment(tmp_path) -> None:
    """A topic with ``retention.ms`` whose records all sit in one (active) segment:
    Kafka deletes them once they expire; a reader starts again at the log end."""
    lg = make_log(str(tmp_path / "t-0"), **{"retention.ms": "2000"})
    for i in range(100):
        append(lg, [(None, b"r%d" % i)], ts=1000)
    assert len(lg.segments) == 1
    assert lg.delete_old_segments(1000 + 2000) == []  # not expired yet
    assert len(lg.delete_old_segments(1000 + 2001)) == 1
    assert lg.log_start_offset == lg.log_end_offset == 100


def test_retention_by_size_keeps_the_newest_bytes(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "300", "retention.bytes": "700",
                                            "retention.ms": "-1"})
    for i in range(30):
        append(lg, [(None, b"y" * 60)], ts=1000 + i)
    lg.delete_old_segments(10_000)
    # As Kafka's retention.bytes (the active segment counted too): a segment goes only if
    # what stays is still at least the bound, so one more deletion would go below it.
    assert 700 <= lg.size < 700 + lg.segments[0].size
    compacted = make_log(str(tmp_path / "c-0"), **{"segment.bytes": "300",
                                                    "retention.bytes": "1",
                                                    "cleanup.policy": "compact"})
    for i in range(10):
        append(compacted, [(b"k", b"y" * 60)], ts=1000 + i)
    assert compacted.delete_old_segments(10_000) == []  # compact-only logs keep everything


def test_log_manager_unlinks_deleted_segments_after_the_delay(tmp_path) -> None:
    manager = LogManager([str(tmp_path)], now_ms=1000)
    lg = manager.load_log(TP, LogConfig.resolve({"segment.bytes": "300", "retention.ms": "1",
                                                 "file.delete.delay.ms": "5000"}), None, 1000)
    for i in range(10):
        append(lg, [(None, b"z" * 60)], ts=1000 + i)
    assert manager.cleanup(now_ms=100_000) > 0
    leftovers = [f for f in os.listdir(lg.dir) if f.endswith(".deleted")]
    assert leftovers
    manager.cleanup(now_ms=104_000)
    assert [f for f in os.listdir(lg.dir) if f.endswith(".deleted")] == leftovers
    manager.cleanup(now_ms=105_001)
    assert not [f for f in os.listdir(lg.dir) if f.endswith(".deleted")]
    manager.shutdown()


# --- compaction ---------------------------------------------------------------------------

def fill(lg: Log, count: int, keys: int, seed: int, ts: int) -> dict[bytes, bytes | None]:
    """Write ``count`` keyed records (overwrites and ~5% tombstones) in batches of 50;
    return what a reader should end up with per key."""
    rng = random.Random(seed)
    expected: dict[bytes, bytes | None] = {}
    batch: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):
        key = b"key-%d" % rng.randrange(keys)
        value = None if rng.random() < 0.05 else b"v%d" % i
        batch.append((key, value))
        expected[key] = value
        if len(batch) == 50:
            append(lg, batch, ts)
            batch = []
    if batch:
        append(lg, batch, ts)
    return expected


def latest_per_key(lg: Log) -> dict[bytes, bytes | None]:
    seen: dict[bytes, bytes | None] = {}
    for _, key, value in records_of(lg):
        seen[key] = value
    return seen


def live(expected: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    return {k: v for k, v in expected.items() if v is not None}


def test_compaction_keeps_exactly_the_latest_value_per_key(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"), **{"cleanup.policy": "compact",
                                            "segment.bytes": "262144",
                                            "delete.retention.ms": "60000"})
    expected = fill(lg, 200_000, keys=5000, seed=7, ts=1_000_000)
    append(lg, [(b"tail", b"active")], ts=1_000_000)
    lg.roll(1_000_000)
    append(lg, [(b"active", b"segment")], ts=1_000_000)  # the active segment is untouched
    before = lg.size
    cleaner = LogCleaner(lambda: {TP: lg})
    stats = cleaner.clean(TP, lg, now_ms=1_000_000)
    assert stats.records_dropped > 150_000
    assert lg.size < before / 5
    got = latest_per_key(lg)
    assert live(got) == live(expected) | {b"tail": b"active", b"active": b"segment"}
    # Tombstones stay until delete.retention.ms has passed, so readers see the deletes.
    assert {k for k, v in got.items() if v is None} == \
        {k for k, v in expected.items() if v is None}
    offsets = [o for o, _, _ in records_of(lg)]
    assert offsets == sorted(offsets)  # offsets are kept, with gaps
    # A later pass past the horizon removes the tombstones.
    lg.roll(2_000_000)
    append(lg, [(b"newest", b"x")], ts=2_000_000)
    cleaner.first_dirty[TP] = 0  # make the whole log dirty again
    cleaner.clean(TP, lg, now_ms=2_000_000)
    assert all(v is not None for v in latest_per_key(lg).values())
    assert live(latest_per_key(lg)) == live(expected) | {b"tail": b"active",
                                                          b"active": b"segment",
                                                          b"newest": b"x"}


def test_dirty_ratio_and_min_compaction_lag_decide_what_is_cleaned(tmp_path) -> None:
    lg = make_log(str(tmp_path / "t-0"), **{"cleanup.policy": "compact", "segment.bytes": "2000",
                                            "min.compaction.lag.ms": "50000"})
    fill(lg, 500, keys=10, seed=1, ts=1000)
    fill(lg, 500, keys=10, seed=2, ts=90_000)
    cleaner = LogCleaner(lambda: {TP: lg})
    ratio, first_dirty, end = cleaner.dirty_ratio(TP, lg, now_ms=100_000)
    assert ratio == 1.0 and first_dirty == 0
    young = [s for s in lg.segments if s.largest_timestamp > 100_000 - 50_000]
    assert end == young[0].base_offset  # segments younger than the lag are not touched
    cleaner.maybe_clean(now_ms=100_000)
    assert cleaner.first_dirty[TP] == end
    assert cleaner.dirty_ratio(TP, lg, now_ms=100_000)[0] == 0.0
    assert cleaner.maybe_clean(now_ms=100_000) is None


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", ["cleaned-written", "swap-renamed", "old-deleted",
                                  "swap-installed", "indexes-rebuilt"])
def test_a_crash_at_any_step_of_a_swap_leaves_a_readable_log(tmp_path, step) -> None:
    path = str(tmp_path / "t-0")
    lg = make_log(path, **{"cleanup.policy": "compact", "segment.bytes": "4096"})
    expected = fill(lg, 3000, keys=40, seed=3, ts=1000)
    lg.roll(1000)
    append(lg, [(b"last", b"one")], ts=1000)
    lg.flush()
    swaps = []

    def crash(at: str) -> None:
        if at == step:
            swaps.append(at)
            if len(swaps) == 2:  # let one segment swap completely first
                raise Crash(at)

    with pytest.raises(Crash):
        LogCleaner(lambda: {TP: lg}, crash_hook=crash).clean(TP, lg, now_ms=1000)
    lg.close()
    reopened = make_log(path)  # not a clean shutdown
    assert not [f for f in os.listdir(path) if f.endswith((".cleaned", ".swap", ".deleted"))]
    assert live(latest_per_key(reopened)) == live(expected) | {b"last": b"one"}
    assert reopened.log_end_offset == 3001
    # And the log can be cleaned to the end afterwards.
    LogCleaner(lambda: {TP: reopened}).clean(TP, reopened, now_ms=1000)
    assert live(latest_per_key(reopened)) == live(expected) | {b"last": b"one"}


# --- segment files ----------------------------------------------------------------------------

def test_preallocated_segments_are_trimmed_on_roll_and_recovered_after_a_crash(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    lg = make_log(path, **{"preallocate": "true", "segment.bytes": "65536"})
    append(lg, [(None, b"a" * 100)], ts=1000)
    assert os.path.getsize(lg.active_segment.path) == 65536  # reserved up front
    first = lg.active_segment
    lg.roll(1000)
    assert os.path.getsize(first.path) == first.size < 65536  # trimmed on roll
    append(lg, [(None, b"b" * 100)], ts=1000)
    lg.flush()
    os.close(lg.active_segment.fd)  # a crash: the active file keeps its zeros
    reopened = make_log(path)
    assert [v for _, _, v in records_of(reopened)] == [b"a" * 100, b"b" * 100]
    append(reopened, [(None, b"c" * 100)], ts=1000)
    assert [v for _, _, v in records_of(reopened)][-1] == b"c" * 100
    reopened.close()
    assert os.path.getsize(reopened.active_segment.path) == reopened.active_segment.size


def test_segment_jitter_rolls_segments_before_segment_ms(tmp_path) -> None:
    lg = Log(str(tmp_path / "t-0"), "t", 0, LogConfig.resolve(
        {"segment.ms": "10000", "segment.jitter.ms": "8000"}), now_ms=0,
        rng=random.Random(5))
    jitters = []
    for step in range(20):
        jitters.append(lg.active_segment.roll_jitter_ms)
        append(lg, [(None, b"x")], ts=step * 1000)
    assert all(0 <= j < 8000 for j in jitters) and len(set(jitters)) > 1
    # Every segment rolled once it was older than segment.ms minus its own jitter.
    assert len(lg.segments) > 20 * 1000 // 10000 + 1


def test_file_removals_run_where_the_log_manager_is_told(tmp_path) -> None:
    """Unlinking big cached segments takes a fraction of a second, so a node runs it on a
    worker thread: a deleted partition's directory is renamed aside at once (a namesake
    can start empty), expired segments and those DeleteRecords cut off are closed, but
    the files go only when the background job runs."""
    jobs: list = []

    def run_jobs() -> None:
        while jobs:
            jobs.pop(0)()
    manager = LogManager([str(tmp_path)], now_ms=1000)
    manager.in_background = jobs.append
    lg = manager.load_log(TP, LogConfig.resolve({"segment.bytes": "300", "retention.ms": "1",
                                                 "file.delete.delay.ms": "0"}), None, 1000)
    for i in range(10):
        append(lg, [(None, b"z" * 60)], ts=1000 + i)
    assert manager.cleanup(now_ms=100_000) > 0
    assert [f for f in os.listdir(lg.dir) if f.endswith(".deleted")]
    run_jobs()
    assert not [f for f in os.listdir(lg.dir) if f.endswith(".deleted")]

    def directories() -> list[str]:
        return sorted(name for name in os.listdir(tmp_path) if (tmp_path / name).is_dir())
    for i in range(10):
        append(lg, [(None, b"z" * 60)], ts=200_000 + i)
    files = set(os.listdir(lg.dir))
    lg.delete_records_before(lg.log_end_offset - 1)  # whole segments below it go
    assert set(os.listdir(lg.dir)) == files
    run_jobs()
    assert len(set(os.listdir(lg.dir))) < len(files)
    assert [value for _, _, value in records_of(lg)] == [b"z" * 60]

    manager.delete_log(TP)
    [aside] = directories()
    assert aside.endswith("-delete") and os.listdir(tmp_path / aside)
    again = manager.load_log(TP, LogConfig.resolve(), None, 1000)
    assert again.log_end_offset == 0
    run_jobs()
    assert directories() == [os.path.basename(again.dir)]
    assert not jobs
    manager.shutdown()
