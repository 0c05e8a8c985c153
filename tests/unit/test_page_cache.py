"""log.page.cache.window.bytes: a log leaves only its newest bytes in the page cache,
drops old ones again after a fetch reads them, and never loses a byte doing so."""

from __future__ import annotations

import errno
import gc
import os

import pytest

from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager
from ottla.storage.page_cache import PageCacheWindow
from tests.helpers import cached_bytes, on_tmpfs
from tests.unit.test_log import append, make_log, read_values

WINDOW = 64 * 1024
VALUE = 16 * 1024


@pytest.fixture
def log_dir(tmp_path) -> str:
    if on_tmpfs(str(tmp_path)):
        pytest.skip("needs tmp_path on a disk-backed file system, not tmpfs, whose page "
                    "cache is the file and cannot be dropped (pytest --basetemp=DIR)")
    return str(tmp_path / "t-0")


def fill(log, count: int, size: int = VALUE) -> list[bytes]:
    values = [bytes([i % 251]) * size for i in range(count)]
    for value in values:
        append(log, [value])
    return values


def test_a_log_keeps_only_its_newest_window_in_the_page_cache(log_dir) -> None:
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(WINDOW))  # jobs run inline
    values = fill(log, 64)
    segment = log.active_segment
    assert segment.size > 16 * WINDOW
    # Everything more than two windows behind the end was written back and dropped ...
    assert cached_bytes(segment.path, 0, segment.size - 2 * WINDOW) == 0
    # ... the newest window is still there for consumers at the tail ...
    assert cached_bytes(segment.path, segment.size - WINDOW) >= WINDOW - 4096
    # ... and nothing was lost.
    assert [v for _, v in read_values(log)] == values


def test_large_appends_are_dropped_whole(log_dir) -> None:
    """Appends of 1 MiB fill the cache with large folios that straddle window edges."""
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(4 * WINDOW))
    values = fill(log, 24, size=1 << 20)
    segment = log.active_segment
    assert cached_bytes(segment.path, 0, segment.size - 8 * WINDOW - (1 << 20)) == 0
    assert [v for _, v in read_values(log)] == values


def test_without_a_window_everything_written_stays_cached(log_dir) -> None:
    log = make_log(log_dir)
    fill(log, 64)
    segment = log.active_segment
    assert cached_bytes(segment.path) >= segment.size - 4096


def test_old_bytes_a_fetch_maps_are_dropped_again_once_sent(log_dir) -> None:
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(WINDOW))
    values = fill(log, 64)
    path = log.active_segment.path
    records = log.read(0, 8 * VALUE).records
    assert records is not None and records.position == 0
    view = records.map()  # what the network layer hands to the socket
    assert view is not None
    assert values[0] in bytes(view[:2 * VALUE])  # read from disk, intact
    assert cached_bytes(path, 0, records.length) > 0
    del view
    gc.collect()
    assert cached_bytes(path, 0, records.length - records.length % 4096) == 0
    # A read at the tail is left cached.
    tail = log.read(63, VALUE).records
    view = tail.map()
    del view
    gc.collect()
    assert cached_bytes(path, tail.position, tail.position + tail.length) >= tail.length - 4096


def test_a_rolled_segment_is_dropped_whole(log_dir) -> None:
    log = make_log(log_dir, **{"segment.bytes": str(40 * VALUE)})
    log.use_page_cache_window(PageCacheWindow(WINDOW))
    values = fill(log, 64)
    assert len(log.segments) == 2
    old = log.segments[0]
    assert cached_bytes(old.path) == 0
    assert [v for _, v in read_values(log)] == values


def test_the_work_runs_where_the_log_manager_says(log_dir) -> None:
    jobs = []
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(WINDOW, run=jobs.append))
    fill(log, 64)
    segment = log.active_segment
    assert jobs, "old windows are handed to the runner"
    assert cached_bytes(segment.path) >= segment.size - 4096  # nothing dropped yet
    for job in jobs:
        job()
    assert cached_bytes(segment.path, 0, segment.size - 2 * WINDOW) == 0


def test_a_log_manager_hands_the_work_to_its_current_runner(tmp_path) -> None:
    """Logs opened before and after the setting follow it, and the jobs go wherever the
    manager's ``in_background`` points when they come (a worker thread while the node
    serves, inline once it shuts down)."""
    if on_tmpfs(str(tmp_path)):
        pytest.skip("needs tmp_path on a disk-backed file system, not tmpfs, whose page "
                    "cache is the file and cannot be dropped (pytest --basetemp=DIR)")
    earlier: list = []
    jobs: list = []
    manager = LogManager([str(tmp_path)], now_ms=1000)
    manager.in_background = earlier.append
    before = manager.load_log(("a", 0), LogConfig.resolve({}), None, 1000)
    manager.use_page_cache_window(WINDOW)
    after = manager.load_log(("b", 0), LogConfig.resolve({}), None, 1000)
    manager.in_background = jobs.append
    for log in (before, after):
        fill(log, 32)
    assert not earlier and len(jobs) >= 2
    for job in jobs:
        job()
    for log in (before, after):
        segment = log.active_segment
        assert cached_bytes(segment.path, 0, segment.size - 2 * WINDOW) == 0
    manager.shutdown()


def test_a_read_across_the_window_edge_drops_its_old_part(log_dir) -> None:
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(WINDOW))
    fill(log, 64)
    segment = log.active_segment
    edge = segment.cold_below
    records = log.read(0, 1 << 30).records
    assert records is not None and records.position < edge < records.position + records.length
    view = records.map()
    assert len(bytes(view)) == records.length  # all of it in the page cache now
    del view
    gc.collect()
    assert cached_bytes(segment.path, 0, edge) == 0
    assert cached_bytes(segment.path, edge) > 0  # the window itself stays


def test_old_bytes_a_fetch_reads_into_memory_are_dropped_too(log_dir) -> None:
    log = make_log(log_dir)
    log.use_page_cache_window(PageCacheWindow(WINDOW))
    values = fill(log, 64)
    path = log.active_segment.path
    records = log.read(0, VALUE).records  # small: the network layer preads these
    assert values[0] in records.read()
    # Whole pages only: the one it shares with the next batch goes with the next read.
    assert cached_bytes(path, 0, records.length - records.length % 4096) == 0


def test_a_failed_write_back_takes_the_log_dir_offline(tmp_path, monkeypatch) -> None:
    """The kernel reports a write-back error once per open file: caught here, the
    segment's next fsync would succeed. So the log dir goes offline, as after a failed
    fsync (a closed descriptor, EBADF, is not an error of the data)."""
    from ottla.protocol.errors import ErrorCode, KafkaError
    from ottla.storage import page_cache
    jobs: list = []
    manager = LogManager([str(tmp_path)], now_ms=1000)
    manager.in_background = jobs.append
    manager.use_page_cache_window(WINDOW)
    log = manager.load_log(("a", 0), LogConfig.resolve({}), None, 1000)
    fill(log, 16)

    def fail(errno_: int):
        def write_back(fd: int, start: int, length: int) -> None:
            raise OSError(errno_, os.strerror(errno_))
        return write_back
    monkeypatch.setattr(page_cache, "write_back", fail(errno.EBADF))
    jobs.pop(0)()
    manager.flush_dirty(now_ms=2000)
    assert not log.offline
    monkeypatch.setattr(page_cache, "write_back", fail(errno.EIO))
    jobs.pop(0)()
    manager.flush_dirty(now_ms=3000)
    assert log.offline and str(tmp_path) in manager.offline_dirs
    with pytest.raises(KafkaError) as e:
        append(log, [b"more"])
    assert e.value.code == ErrorCode.kafka_storage_error
