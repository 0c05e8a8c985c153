"""The on-disk Raft log behaves like the in-memory one, across reopening and snapshots."""

from __future__ import annotations

import itertools
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.metadata import records as meta
from ottla.raft.file_log import FileRaftLog, entries_of
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry, Snapshot

counter = itertools.count()
NOW = 1_700_000_000_000


def CLOCK() -> float:  # a constant clock
    return NOW / 1000


def record(n: int) -> meta.FeatureLevelRecord:
    return meta.FeatureLevelRecord(name=f"f{n}", feature_level=n % 100)


ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4), st.integers(0, 3)),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("snapshot"), st.integers(0, 40)),
    st.tuples(st.just("install"), st.integers(1, 10)),
    st.tuples(st.just("reopen")),
), max_size=25)


def boundaries(log: MemoryLog) -> list[int]:
    return [log.start_offset + sum(e.count for e in log.entries[:i])
            for i in range(len(log.entries) + 1)]


@settings(max_examples=60, deadline=None)
@given(ops)
def test_file_log_matches_memory_log(tmp_path_factory, operations) -> None:
    directory = str(tmp_path_factory.mktemp("raftlog"))
    disk = FileRaftLog(directory, 1, [1, 2, 3], meta, clock=CLOCK)
    memory = MemoryLog()
    epoch = 1
    try:
        for op in operations:
            if op[0] == "append":
                epoch += op[1]
                entries = []
                for _ in range(op[2]):
                    size = op[3]  # 0: a leader-change control batch
                    payload = tuple(record(next(counter)) for _ in range(size)) or None
                    entries.append(Entry(epoch, payload, max(size, 1)))
                disk.append(entries)
                memory.append(entries)
            elif op[0] == "truncate":
                edges = boundaries(memory)
                target = edges[min(op[1], len(edges) - 1)]
                disk.truncate_to(target)
                memory.truncate_to(target)
                epoch = max(epoch, memory.last_epoch)
            elif op[0] == "snapshot":
                edges = boundaries(memory)[1:]
                if edges:
                    end = edges[min(op[1], len(edges) - 1)]
                    snapshot = Snapshot(end, memory.epoch_at(end - 1), b"state at %d" % end)
                    disk.take_snapshot(snapshot)
                    memory.take_snapshot(snapshot)
            elif op[0] == "install":
                epoch += 1
                snapshot = Snapshot(memory.end_offset + op[1], epoch, b"installed")
                disk.install_snapshot(snapshot)
                memory.install_snapshot(snapshot)
            else:
                disk.flush()
                disk.close()
                disk = FileRaftLog(directory, 1, [1, 2, 3], meta, clock=CLOCK)
            assert (disk.start_offset, disk.end_offset) == (memory.start_offset,
                                                           memory.end_offset)
            assert disk.last_epoch == memory.last_epoch
            assert disk.read(memory.start_offset, 1000) == memory.read(memory.start_offset, 1000)
            if memory.snapshot is not None:
                assert disk.snapshot == memory.snapshot
            for offset in range(memory.start_offset, memory.end_offset):
                assert disk.epoch_at(offset) == memory.epoch_at(offset)
            for e in range(0, epoch + 2):
                assert disk.end_offset_for_epoch(e) == memory.end_offset_for_epoch(e), e
            edges = boundaries(memory)
            if len(edges) > 2:
                assert disk.entries_between(edges[1], edges[-1]) == \
                    memory.entries_between(edges[1], edges[-1])
    finally:
        disk.close()


def test_a_follower_appends_the_leaders_batches_byte_for_byte(tmp_path) -> None:
    leader = FileRaftLog(str(tmp_path / "leader"), 1, [1, 2, 3], meta, clock=CLOCK)
    follower = FileRaftLog(str(tmp_path / "follower"), 2, [1, 2, 3], meta,
                           clock=lambda: (NOW + 5) / 1000)
    try:
        leader.append([Entry(3, None), Entry(3, (record(1), record(2)), 2)])
        follower.append(leader.read(0, 10))
        follower.flush()
        for name in ("00000000000000000000.log",):
            with open(os.path.join(leader.dir, name), "rb") as a, \
                    open(os.path.join(follower.dir, name), "rb") as b:
                assert a.read() == b.read()
        assert entries_of(follower.read(0, 10)[1].raw or b"", meta) == [Entry(3, (record(1),
                                                                           record(2)), 2)]
    finally:
        leader.close()
        follower.close()


def test_a_flush_begun_before_a_truncation_claims_nothing_after_it(tmp_path) -> None:
    log = FileRaftLog(str(tmp_path / "log"), 1, [1], meta, clock=CLOCK)
    try:
        log.append([Entry(1, (record(1),)), Entry(1, (record(2),))])
        token = log.begin_flush()
        log.truncate_to(1)
        log.append([Entry(2, (record(3),), 1)])
        log.fsync(token)
        log.end_flush(token)
        assert log.flushed_end_offset == 0  # the new entry at 1 is not known to be durable
        log.flush()
        assert log.flushed_end_offset == 2
    finally:
        log.close()


def test_a_crash_while_installing_a_snapshot_drops_the_old_log_on_the_next_start(
        tmp_path) -> None:
    from ottla.common.files import write_atomically
    from ottla.raft.file_log import INSTALL_MARKER

    directory = str(tmp_path / "log")
    log = FileRaftLog(directory, 2, [1, 2, 3], meta, clock=CLOCK)
    log.append([Entry(1, (record(i),)) for i in range(8)])  # diverged from the leader
    log.flush()
    # The install wrote its marker and the snapshot, then the process died.
    write_atomically(os.path.join(directory, INSTALL_MARKER), b"5")
    log._write_snapshot(Snapshot(5, 3, b"leader state"))
    log.close()
    reopened = FileRaftLog(directory, 2, [1, 2, 3], meta, clock=CLOCK)
    try:
        assert (reopened.start_offset, reopened.end_offset) == (5, 5)
        assert reopened.snapshot == Snapshot(5, 3, b"leader state")
        assert reopened.last_epoch == 3
        assert not os.path.exists(os.path.join(directory, INSTALL_MARKER))
    finally:
        reopened.close()


def test_the_flush_after_a_roll_fsyncs_the_directory_holding_the_new_segment(
        tmp_path, fsynced) -> None:
    log = FileRaftLog(str(tmp_path / "log"), 1, [1], meta, clock=CLOCK)
    try:
        log.append([Entry(1, (record(1),))])
        log.flush()
        fsynced.clear()
        log.append([Entry(1, (record(2),))])
        log.flush()
        assert fsynced and log.dir not in fsynced
        log.log.roll(NOW)
        log.append([Entry(1, (record(3),))])
        fsynced.clear()
        log.flush()
        assert log.dir in fsynced
        assert log.flushed_end_offset == 3
    finally:
        log.close()
