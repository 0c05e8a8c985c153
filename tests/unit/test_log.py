"""The partition log: appends, reads, segments, indexes, recovery, producer state."""

from __future__ import annotations

import os

import pytest

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    build_batch,
    build_marker,
    decode_records,
    read_header,
    scan_batches,
)
from ottla.storage.checkpoint import read_offsets, write_offsets
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig
from ottla.storage.log_manager import LogManager


def make_log(path: str, clean: bool = False, recovery_point: int = 0, **configs: str) -> Log:
    return Log(path, "t", 0, LogConfig.resolve(configs), now_ms=1000, clean_shutdown=clean,
               recovery_point=recovery_point)


def append(log: Log, values: list[bytes], ts: int = 1000, epoch: int = 0, **kw: int):
    batch = bytearray(build_batch([(None, v) for v in values], timestamp=ts, **kw))
    return log.append_as_leader(batch, read_header(batch), epoch, now_ms=ts)


def read_values(log: Log, offset: int = 0, max_bytes: int = 1 << 30) -> list[tuple[int, bytes]]:
    out = []
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes)
        if info.records is None:
            break
        data = info.records.read()
        batches = list(scan_batches(data))
        assert batches, "a read must return at least one whole batch"
        for pos, header in batches:
            out += [(r.offset, r.value) for r in decode_records(data, pos, header)
                    if r.offset >= offset]
            offset = header.next_offset
    return out


def test_offsets_are_assigned_in_order_and_read_back(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    infos = [append(log, [b"a", b"b", b"c"]), append(log, [b"d"])]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3)]
    assert log.log_end_offset == 4
    assert read_values(log) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert read_values(log, 1)[:2] == [(1, b"b"), (2, b"c")]


def test_segments_roll_by_size_and_reads_cross_them(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "500"})
    for i in range(40):
        append(log, [f"value-{i:03d}".encode() * 4])
    assert len(log.segments) > 5
    names = sorted(f for f in os.listdir(log.dir) if f.endswith(".log"))
    assert names[0] == "00000000000000000000.log"
    assert [int(n[:20]) for n in names] == [s.base_offset for s in log.segments]
    assert [v for _, v in read_values(log)] == [f"value-{i:03d}".encode() * 4 for i in range(40)]


def test_segments_roll_by_time(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"segment.ms": "1000"})
    append(log, [b"a"], ts=1000)
    append(log, [b"b"], ts=1500)
    assert len(log.segments) == 1
    append(log, [b"c"], ts=2500)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_old_records_roll_by_their_own_timestamps_not_the_clock(tmp_path) -> None:
    """Kafka's LogSegment.timeWaitedForRoll: a segment's age is the new batch's max
    timestamp less the segment's first batch's. Records from long ago (a replay, a
    backfill) written now fill one segment while their own times stay within segment.ms,
    instead of rolling at every batch because the clock is far ahead of them."""
    log = make_log(str(tmp_path / "t-0"), **{"segment.ms": "3600000"})
    now = 10 * 86_400_000
    for i in range(20):  # an hour of records from day 0, one batch a minute, written now
        batch = bytearray(build_batch([(None, b"old")], timestamp=1000 + i * 60_000))
        log.append_as_leader(batch, read_header(batch), 0, now_ms=now + i)
    assert len(log.segments) == 1
    batch = bytearray(build_batch([(None, b"later")], timestamp=1000 + 3_600_001))
    log.append_as_leader(batch, read_header(batch), 0, now_ms=now + 20)
    assert [s.base_offset for s in log.segments] == [0, 20]  # record time passed an hour


def test_index_lookups_land_on_the_right_batch(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"index.interval.bytes": "100"})
    for i in range(200):
        append(log, [f"{i}".encode() * 20], ts=1000 + i)
    segment = log.active_segment
    assert len(segment.index.offsets) > 20
    for offset in (0, 1, 57, 123, 199):
        _pos, header = segment.translate_offset(offset)
        assert header.base_offset == offset
    assert log.offset_for_timestamp(1100) == (1100, 100)
    assert log.offset_for_timestamp(10**12) is None


def test_read_honours_max_bytes_but_returns_one_whole_batch(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    append(log, [b"x" * 5000])
    append(log, [b"y" * 10])
    first = log.read(0, 100)
    assert first.records is not None and first.records.length > 5000
    assert len(list(scan_batches(first.records.read()))) == 1
    # Without min_one_batch (a partition after the first with data in a fetch) a first
    # batch over the limit gives nothing (Kafka's firstEntryIncomplete), never part of it.
    assert log.read(0, 100, min_one_batch=False).records is None
    small = log.read(1, 100, min_one_batch=False).records
    assert small is not None and offsets_in(small.read()) == [1]
    # A limit that holds the first batch whole may still cut the next one short.
    cut = log.read(0, first.records.length + 10, min_one_batch=False).records
    assert cut is not None and cut.length == first.records.length + 10


def test_a_read_without_min_one_batch_never_skips_a_batch_too_large(tmp_path) -> None:
    """A first batch over the limit stops the read; the next segment's batches, which
    would fit, are not returned in its place."""
    log = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "1000"})
    append(log, [b"x" * 2000])  # offset 0, alone in its segment
    append(log, [b"y"])  # offset 1, in the next
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.read(0, 500, min_one_batch=False).records is None
    assert offsets_in(log.read(1, 500, min_one_batch=False).records.read()) == [1]


def offsets_in(data: bytes) -> list[int]:
    return [header.base_offset for _, header in scan_batches(data)]


def test_read_out_of_range_is_an_error_and_high_watermark_bounds_reads(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    append(log, [b"a"])
    append(log, [b"b"])
    with pytest.raises(KafkaError) as e:
        log.read(5, 1000)
    assert e.value.code == ErrorCode.offset_out_of_range
    info = log.read(0, 10000, max_offset=1)
    assert [h.base_offset for _, h in scan_batches(info.records.read())] == [0]
    assert log.read(2, 1000).records is None


def test_clean_reopen_restores_the_log_end_and_indexes(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path, **{"index.interval.bytes": "50", "segment.bytes": "2000"})
    for i in range(100):
        append(log, [f"v{i}".encode() * 10])
    log.flush()
    log.close()
    reopened = make_log(path, clean=True, **{"index.interval.bytes": "50"})
    assert reopened.log_end_offset == 100
    assert [v for _, v in read_values(reopened)] == [f"v{i}".encode() * 10 for i in range(100)]


def test_recovery_truncates_garbage_appended_after_the_last_batch(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path)
    for i in range(10):
        append(log, [f"v{i}".encode()])
    size = log.active_segment.size
    log.close()
    with open(os.path.join(path, "00000000000000000000.log"), "ab") as f:
        f.write(os.urandom(300))
    recovered = make_log(path)
    assert recovered.log_end_offset == 10
    assert os.path.getsize(os.path.join(path, "00000000000000000000.log")) == size
    assert len(read_values(recovered)) == 10
    append(recovered, [b"after"])
    assert read_values(recovered)[-1] == (10, b"after")


def test_recovery_truncates_a_torn_last_batch(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path)
    for i in range(5):
        append(log, [f"v{i}".encode() * 50])
    sizes = [h.size for _, h in log.active_segment.iter_headers()]
    log.close()
    seg = os.path.join(path, "00000000000000000000.log")
    with open(seg, "r+b") as f:
        f.truncate(sum(sizes) - 7)
    recovered = make_log(path)
    assert recovered.log_end_offset == 4
    assert os.path.getsize(seg) == sum(sizes[:4])


def test_recovery_stops_at_a_corrupt_batch_and_drops_later_segments(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path, **{"segment.bytes": "300"})
    for i in range(20):
        append(log, [f"value-{i}".encode() * 5])
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    second = log.segments[1]
    pos, header = next(second.iter_headers())
    log.close()
    with open(second.path, "r+b") as f:
        f.seek(pos + header.size - 3)
        f.write(b"\xff\xff\xff")
    recovered = make_log(path)
    assert recovered.log_end_offset == header.base_offset
    assert [s.base_offset for s in recovered.segments] == bases[:2]
    assert not os.path.exists(os.path.join(path, f"{bases[2]:020d}.log"))


def test_recovery_point_skips_flushed_segments(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path, **{"segment.bytes": "300"})
    for i in range(20):
        append(log, [f"value-{i}".encode() * 5])
    first = log.segments[0]
    log.close()
    # Corruption below the recovery point is not looked for (those segments were fsynced).
    with open(first.path, "r+b") as f:
        f.seek(first.size - 2)
        f.write(b"\x00\x00")
    recovered = make_log(path, recovery_point=log.segments[1].base_offset)
    assert recovered.log_end_offset == 20


def test_idempotent_duplicates_return_the_original_offsets(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    first = append(log, [b"a", b"b"], ts=7000, producer_id=5, producer_epoch=0,
                   base_sequence=0)
    assert first.log_append_time == -1  # a CreateTime topic
    dup = append(log, [b"a", b"b"], ts=9000, producer_id=5, producer_epoch=0, base_sequence=0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    # As Kafka's UnifiedLog: the original batch's timestamp as its append time.
    assert dup.log_append_time == 7000
    assert log.log_end_offset == 2
    with pytest.raises(KafkaError) as e:
        append(log, [b"c"], producer_id=5, producer_epoch=0, base_sequence=5)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    nxt = append(log, [b"c"], producer_id=5, producer_epoch=0, base_sequence=2)
    assert nxt.first_offset == 2 and not first.duplicate
    bumped = append(log, [b"d"], producer_id=5, producer_epoch=1, base_sequence=0)
    assert bumped.first_offset == 3
    with pytest.raises(KafkaError) as e:  # the older epoch is now fenced
        append(log, [b"e"], producer_id=5, producer_epoch=0, base_sequence=3)
    assert e.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as e:  # a new epoch must start at sequence 0
        append(log, [b"f"], producer_id=5, producer_epoch=2, base_sequence=4)
    assert e.value.code == ErrorCode.out_of_order_sequence_number


def test_producer_state_is_rebuilt_on_reopen(tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path)
    append(log, [b"a"], producer_id=9, producer_epoch=3, base_sequence=0)
    log.close()
    reopened = make_log(path)
    dup = append(reopened, [b"a"], producer_id=9, producer_epoch=3, base_sequence=0)
    assert dup.duplicate and reopened.log_end_offset == 1


def test_leader_epochs_answer_end_offsets(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"))
    append(log, [b"a", b"b"], epoch=0)
    append(log, [b"c"], epoch=2)
    append(log, [b"d"], epoch=2)
    cache = log.leader_epoch_cache
    assert cache.entries == [(0, 0), (2, 2)]
    assert cache.end_offset_for(0, log.log_end_offset) == (0, 2)
    assert cache.end_offset_for(1, log.log_end_offset) == (0, 2)
    assert cache.end_offset_for(2, log.log_end_offset) == (2, 4)
    assert cache.epoch_for_offset(3) == 2
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n2\n0 0\n2 2\n"


def test_delete_records_moves_the_start_and_drops_whole_segments(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "300"})
    for i in range(20):
        append(log, [f"value-{i}".encode() * 5])
    log.high_watermark = log.log_end_offset
    second_base = log.segments[1].base_offset
    assert log.delete_records_before(second_base + 1) == second_base + 1
    assert log.segments[0].base_offset == second_base
    with pytest.raises(KafkaError):
        log.read(second_base, 1000)
    assert read_values(log, second_base + 1)[0][0] == second_base + 1


def test_truncate_to_removes_later_offsets(tmp_path) -> None:
    log = make_log(str(tmp_path / "t-0"), **{"segment.bytes": "300"})
    for i in range(20):
        append(log, [f"value-{i}".encode() * 5])
    log.truncate_to(7)
    assert log.log_end_offset == 7
    assert [o for o, _ in read_values(log)] == list(range(7))
    assert append(log, [b"new"]).first_offset == 7


def test_log_manager_marks_clean_shutdown_and_checkpoints(tmp_path) -> None:
    d = str(tmp_path / "logs")
    manager = LogManager([d], now_ms=0)
    manager.discover()
    log = manager.load_log(("t", 0), LogConfig.resolve(), None, 0)
    append(log, [b"a"])
    manager.started()
    assert not manager.clean_shutdown[os.path.abspath(d)]
    manager.shutdown()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    with open(os.path.join(d, "recovery-point-offset-checkpoint")) as f:
        assert f.read() == "0\n1\nt 0 1\n"
    again = LogManager([d], now_ms=0)
    assert again.clean_shutdown[os.path.abspath(d)]
    assert set(again.discover()) == {("t", 0)}


def test_the_clean_shutdown_marker_carries_the_broker_epoch_to_the_next_start(
        tmp_path) -> None:
    """As Kafka's CleanShutdownFileHandler: the epoch written at shutdown is read at the
    next start if every log dir agrees; a crash (marker removed at start) reads -1."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs, now_ms=0)
    assert manager.previous_broker_epoch == -1
    manager.started()
    manager.shutdown(broker_epoch=42)
    with open(os.path.join(dirs[0], ".kafka_cleanshutdown")) as f:
        assert f.read() == '{"version":0,"brokerEpoch":42}'
    again = LogManager(dirs, now_ms=0)
    assert again.previous_broker_epoch == 42
    again.started()  # a kill -9 from here leaves no marker
    assert LogManager(dirs, now_ms=0).previous_broker_epoch == -1
    LogManager(dirs, now_ms=0).shutdown(broker_epoch=7)
    with open(os.path.join(dirs[1], ".kafka_cleanshutdown"), "w") as f:
        f.write('{"version":0,"brokerEpoch":8}')
    assert LogManager(dirs, now_ms=0).previous_broker_epoch == -1  # dirs disagree


def test_a_log_found_on_disk_resumes_its_checkpoints_and_a_new_namesake_starts_at_zero(
        tmp_path) -> None:
    """Checkpointed offsets belong to the logs that were on disk: a partition created
    after its namesake was deleted (its directory gone, the checkpoint not yet rewritten)
    must not start at the old log's start offset."""
    d = str(tmp_path / "logs")
    manager = LogManager([d], now_ms=0)
    manager.discover()
    kept = manager.load_log(("kept", 0), LogConfig.resolve(), None, 0)
    append(kept, [b"a", b"b", b"c"])
    kept.log_start_offset = 2  # as DeleteRecords or retention leave it
    manager.started()
    manager.shutdown()
    path = os.path.join(d, "log-start-offset-checkpoint")
    write_offsets(path, {**read_offsets(path), ("gone", 0): 500})  # a deleted topic's
    again = LogManager([d], now_ms=0)
    again.discover()
    assert again.load_log(("kept", 0), LogConfig.resolve(), None, 0).log_start_offset == 2
    fresh = again.load_log(("gone", 0), LogConfig.resolve(), None, 0)
    assert (fresh.log_start_offset, fresh.log_end_offset) == (0, 0)
    assert append(fresh, [b"x"]).first_offset == 0
    again.shutdown()


def test_high_watermarks_are_checkpointed_and_a_reopened_log_starts_from_them(
        tmp_path) -> None:
    """replication-offset-checkpoint: a log reopens with the high watermark last written
    (bounded by its log end), so a restarted leader does not hide what was committed; a
    log without one starts at 0."""
    d = str(tmp_path / "logs")
    manager = LogManager([d], now_ms=0)
    manager.discover()
    log = manager.load_log(("t", 0), LogConfig.resolve(), None, 0)
    other = manager.load_log(("u", 0), LogConfig.resolve(), None, 0)
    append(log, [b"a", b"b", b"c"])
    append(other, [b"a"])
    log.high_watermark = 2
    manager.started()
    manager.checkpoint_high_watermarks()
    with open(os.path.join(d, "replication-offset-checkpoint")) as f:
        assert sorted(f.read().splitlines()[2:]) == ["t 0 2", "u 0 0"]
    log.high_watermark = 3  # moved on after the checkpoint: a crash loses that
    path = os.path.join(d, "replication-offset-checkpoint")
    written = read_offsets(path)
    manager.shutdown()
    write_offsets(path, {**written, ("u", 0): 40})  # beyond its log end
    again = LogManager([d], now_ms=0)
    again.discover()
    assert again.load_log(("t", 0), LogConfig.resolve(), None, 0).high_watermark == 2
    assert again.load_log(("u", 0), LogConfig.resolve(), None, 0).high_watermark == 1
    again.shutdown()


def test_a_read_slice_maps_exactly_its_bytes_and_not_a_shortened_file(tmp_path) -> None:
    """``FileSlice.map`` is what a plaintext connection sends: the same bytes as ``read``
    at any (page-unaligned) position, still readable after the segment file is unlinked,
    and None once the file no longer holds the whole slice."""
    log = make_log(str(tmp_path / "t-0"))
    for i in range(30):
        append(log, [os.urandom(700 + i)])  # batches that straddle page boundaries
    for offset in (0, 7, 29):
        info = log.read(offset, 5000)
        assert info.records is not None
        assert (info.records.position % 4096 != 0) == (offset != 0)
        view = info.records.map()
        assert view is not None and bytes(view) == info.records.read()
    info = log.read(12, 1 << 20)
    view = info.records.map()
    os.unlink(log.active_segment.path)  # a deleted segment stays mapped until dropped
    assert bytes(view) == info.records.read()
    os.ftruncate(info.records.fd, info.records.position + 10)  # cut short under a fetch
    assert info.records.map() is None


def test_a_flush_makes_new_segment_names_durable_with_a_directory_fsync(
        tmp_path, fsynced) -> None:
    log = make_log(str(tmp_path / "t-0"))
    append(log, [b"a"])
    log.flush()
    assert str(tmp_path / "t-0") in fsynced and str(tmp_path) in fsynced  # a new log
    fsynced.clear()
    append(log, [b"b"])
    log.flush()  # the same segment: its name is already durable
    assert fsynced and not any(os.path.isdir(p) for p in fsynced)
    log.roll(1000)
    append(log, [b"c"])
    fsynced.clear()
    log.flush()
    assert fsynced[-1] == str(tmp_path / "t-0")
    assert str(tmp_path) not in fsynced
    log.close()


def test_a_new_epoch_is_fsynced_with_the_segments_not_on_the_append(tmp_path,
                                                                    fsynced) -> None:
    """KAFKA-15046: no fsync on the request path when a new leader's first batch arrives;
    the partition's flush (off the event loop) makes the checkpoint durable."""
    log = make_log(str(tmp_path / "t-0"))
    append(log, [b"a"], epoch=0)
    append(log, [b"b"], epoch=4)
    assert fsynced == []
    log.flush()
    checkpoint = str(tmp_path / "t-0" / "leader-epoch-checkpoint")
    assert checkpoint in fsynced
    assert fsynced.index(checkpoint) < fsynced.index(str(tmp_path / "t-0"))
    log.close()


def test_epochs_lost_from_the_checkpoint_in_a_crash_are_read_back_from_the_batches(
        tmp_path) -> None:
    path = str(tmp_path / "t-0")
    log = make_log(path)
    append(log, [b"a", b"b"], epoch=0)
    log.flush()
    checkpoint = os.path.join(path, "leader-epoch-checkpoint")
    with open(checkpoint) as f:
        flushed = f.read()
    append(log, [b"c"], epoch=3)
    append(log, [b"d"], epoch=5)
    log.close()
    with open(checkpoint, "w") as f:  # the saves after the flush did not reach the disk
        f.write(flushed)
    again = make_log(path, recovery_point=2)
    assert again.leader_epoch_cache.entries == [(0, 0), (3, 2), (5, 3)]
    assert again.leader_epoch_cache.end_offset_for(3, again.log_end_offset) == (3, 3)
    again.close()


def test_checkpoints_are_written_in_the_background_and_a_failure_takes_the_dir_offline(
        tmp_path) -> None:
    d = str(tmp_path / "logs")
    jobs: list = []
    manager = LogManager([d], now_ms=0)
    manager.in_background = jobs.append
    manager.discover()
    log = manager.load_log(("t", 0), LogConfig.resolve(), None, 0)
    append(log, [b"a", b"b"])
    log.flush()
    manager.checkpoint()
    path = os.path.join(d, "recovery-point-offset-checkpoint")
    assert not os.path.exists(path) and len(jobs) == 1  # figures taken, not yet written
    log.recovery_point = 0  # later changes do not leak into the job
    jobs.pop()()
    assert read_offsets(path) == {("t", 0): 2}

    os.unlink(path)
    os.mkdir(path)  # the next write fails
    manager.checkpoint()
    jobs.pop()()
    assert manager.offline_dirs == set()
    manager.flush_dirty(now_ms=1)
    assert manager.offline_dirs == {os.path.abspath(d)} and log.offline


def _txn_batch(producer_epoch: int, base_sequence: int, count: int) -> bytearray:
    return bytearray(build_batch([(None, b"r")] * count, timestamp=1000, producer_id=7,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence,
                                 transactional=True))


def test_after_a_v2_marker_the_new_epoch_starts_at_sequence_0(tmp_path) -> None:
    """Kafka's checkSequence: the transactions-v2 marker carries the bumped epoch and
    clears the producer's batches; the next batch of that epoch must start at sequence
    0 (a gap would have been accepted before, and the missing batch refused forever)."""
    log = make_log(str(tmp_path / "t-0"))
    batch = _txn_batch(0, 0, 3)
    log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
    marker = bytearray(build_marker(producer_id=7, producer_epoch=1, commit=True,
                                    coordinator_epoch=0, timestamp=1000))
    log.append_as_leader(marker, read_header(marker), 0, now_ms=1000)
    gap = _txn_batch(1, 5, 2)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(gap, read_header(gap), 0, now_ms=1000)
    assert refused.value.code == ErrorCode.out_of_order_sequence_number
    first = _txn_batch(1, 0, 5)
    assert log.append_as_leader(first, read_header(first), 0, now_ms=1000).first_offset == 4




def test_a_batch_overtaking_one_being_verified_is_out_of_order(tmp_path) -> None:
    """Kafka's VerificationStateEntry: while a producer's batch from sequence 0 waits for
    its transaction coordinator, a later batch (sequence 12) that gets there first is
    refused OUT_OF_ORDER_SEQUENCE_NUMBER (the client retries it); once the first is in,
    the second follows."""
    log = make_log(str(tmp_path / "t-0"))
    log.producer_state.begin_verification(7, 0, 0, supports_epoch_bump=False, now_ms=1000)
    log.producer_state.begin_verification(7, 12, 0, supports_epoch_bump=False, now_ms=1000)
    later = _txn_batch(0, 12, 8)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(later, read_header(later), 0, now_ms=1000)
    assert refused.value.code == ErrorCode.out_of_order_sequence_number
    earlier = _txn_batch(0, 0, 12)
    log.append_as_leader(earlier, read_header(earlier), 0, now_ms=1000)
    assert log.append_as_leader(later, read_header(later), 0, now_ms=1000).first_offset == 12


@pytest.mark.parametrize("transactions_v2", [False, True])
def test_a_failed_verification_still_holds_later_batches_back(tmp_path,
                                                              transactions_v2: bool) -> None:
    """The batch from sequence 0 failed its verification (the coordinator was still
    writing the last transaction's markers: CONCURRENT_TRANSACTIONS, retriable) and was
    not appended; the client retries it. A later batch verified meanwhile must not be
    appended first, or the retried one finds a gap it cannot fill (OUT_OF_ORDER forever,
    and the transactional producer's task is lost): as in Kafka, the verification
    state lives until a transactional batch of the producer is appended."""
    log = make_log(str(tmp_path / "t-0"))
    state = log.producer_state
    state.begin_verification(7, 0, 0, supports_epoch_bump=transactions_v2, now_ms=1000)
    # ... its verification fails; the batch from 35 is verified on its own:
    state.begin_verification(7, 35, 0, supports_epoch_bump=transactions_v2, now_ms=1000)
    later = _txn_batch(0, 35, 5)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(later, read_header(later), 0, now_ms=1000)
    assert refused.value.code == ErrorCode.out_of_order_sequence_number
    retried = _txn_batch(0, 0, 35)
    assert log.append_as_leader(retried, read_header(retried), 0, now_ms=1000).first_offset == 0
    assert log.append_as_leader(later, read_header(later), 0, now_ms=1000).first_offset == 35


def test_a_v2_verification_with_no_state_expects_sequence_0(tmp_path) -> None:
    """Kafka's checkSequence: a transactions-v2 producer (Produce v12+) being verified on
    a partition where it has no batches must start at sequence 0, even when the batch
    from 0 was never verified here (it failed before reaching this leader)."""
    log = make_log(str(tmp_path / "t-0"))
    log.producer_state.begin_verification(7, 20, 0, supports_epoch_bump=True, now_ms=1000)
    batch = _txn_batch(0, 20, 5)
    with pytest.raises(KafkaError) as refused:
        log.append_as_leader(batch, read_header(batch), 0, now_ms=1000)
    assert refused.value.code == ErrorCode.out_of_order_sequence_number


def test_a_verification_state_expires_with_producer_ids(tmp_path) -> None:
    """A verification nobody followed up (the producer went away) is forgotten after
    ``producer.id.expiration.ms``, as Kafka's removeExpiredProducers does."""
    log = make_log(str(tmp_path / "t-0"))
    log.producer_state.begin_verification(7, 0, 0, supports_epoch_bump=False, now_ms=1000)
    log.producer_state.remove_expired(now_ms=1000 + 86_400_000, expiration_ms=86_400_000)
    batch = _txn_batch(0, 9, 1)
    assert log.append_as_leader(batch, read_header(batch), 0, now_ms=1000).first_offset == 0
