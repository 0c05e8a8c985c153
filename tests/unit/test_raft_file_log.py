"""The on-disk Raft log behaves like the in-memory one, across reopening and snapshots."""

from __future__ import annotations

import dataclasses
import itertools
import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ottla.common.files import write_atomically
from ottla.metadata import records as meta
from ottla.metadata.bootstrap import decode_snapshot, encode_snapshot
from ottla.protocol.records import control_record_type, decode_records, scan_batches
from ottla.raft.file_log import (
    INSTALL_MARKER,
    LEADER_CHANGE,
    FileRaftLog,
    entries_of,
    snapshot_file_name,
)
from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry, Snapshot, SnapshotWrite
from ottla.raft.quorum import RaftReplica
from ottla.raft.voter_set import Endpoint, ReplicaKey, VoterNode, VoterSet
from ottla.raft.voters_record import KRAFT_VERSION, KRAFT_VOTERS, snapshot_voters

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


def assert_same(disk: FileRaftLog, memory: MemoryLog, max_epoch: int) -> None:
    """Everything RaftReplica asks a log answers the same on disk and in memory."""
    assert (disk.start_offset, disk.end_offset) == (memory.start_offset, memory.end_offset)
    assert disk.last_epoch == memory.last_epoch
    assert disk.read(memory.start_offset, 1000) == memory.read(memory.start_offset, 1000)
    if memory.snapshot is not None:
        assert disk.snapshot == memory.snapshot
    for offset in range(memory.start_offset, memory.end_offset):
        assert disk.epoch_at(offset) == memory.epoch_at(offset)
    for e in range(0, max_epoch + 2):
        assert disk.end_offset_for_epoch(e) == memory.end_offset_for_epoch(e), e
    edges = boundaries(memory)
    if len(edges) > 2:
        assert disk.entries_between(edges[1], edges[-1]) == \
            memory.entries_between(edges[1], edges[-1])


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
                # Anywhere in the log: a leader's epoch may end inside a batch here.
                target = memory.start_offset + op[1] % (memory.end_offset -
                                                        memory.start_offset + 1)
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
            assert_same(disk, memory, epoch)
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


def two_segments(directory: str, node_id: int = 1) -> tuple[FileRaftLog, MemoryLog]:
    """A flushed log of eight entries in two segments (epoch 1 at 0-3, epoch 2 at 4-7)
    with a snapshot at 2, and the same log in memory."""
    disk = FileRaftLog(directory, node_id, [1, 2, 3], meta, clock=CLOCK)
    memory = MemoryLog()
    first = [Entry(1, (record(i),)) for i in range(4)]
    second = [Entry(2, (record(i),)) for i in range(4, 8)]
    disk.append(first)
    disk.log.roll(NOW)
    disk.append(second)
    disk.flush()
    memory.append(first + second)
    for log in (disk, memory):
        log.take_snapshot(Snapshot(2, 1, b"state at 2"))
    return disk, memory


def snapshot_names(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".checkpoint" in n)


def test_a_snapshot_is_adopted_only_at_end_snapshot_which_fsyncs_nothing(
        tmp_path, fsynced) -> None:
    """The split the driver uses: ``write_snapshot`` (on its worker thread) does every
    fsync; the log changes only in ``end_snapshot``, on the loop, without one."""
    directory = str(tmp_path / "log")
    disk, memory = two_segments(directory)
    try:
        take = SnapshotWrite(Snapshot(6, 2, b"state at 6"), install=False)
        files = disk.begin_snapshot(take)
        fsynced.clear()
        FileRaftLog.write_snapshot(files)
        assert fsynced  # the snapshot and its directory
        assert (disk.start_offset, disk.snapshot) == (2, Snapshot(2, 1, b"state at 2"))
        fsynced.clear()
        assert disk.end_snapshot(take)
        memory.end_snapshot(take)
        assert fsynced == []
        assert_same(disk, memory, 3)
        assert snapshot_names(directory) == [snapshot_file_name(6, 2)]

        install = SnapshotWrite(Snapshot(20, 3, b"leader state"), install=True)
        files = disk.begin_snapshot(install)
        FileRaftLog.write_snapshot(files)
        assert (disk.start_offset, disk.end_offset) == (6, 8)  # reads still work
        assert disk.read(6, 10) == memory.read(6, 10)
        assert not any(os.path.exists(path) for path in files.old_files)
        fsynced.clear()
        disk.end_snapshot(install)
        memory.end_snapshot(install)
        assert fsynced == []
        assert_same(disk, memory, 4)
        assert snapshot_names(directory) == [snapshot_file_name(20, 3)]
        assert not os.path.exists(os.path.join(directory, INSTALL_MARKER))
    finally:
        disk.close()


def test_a_take_overtaken_by_an_install_is_dropped_with_its_file(tmp_path) -> None:
    directory = str(tmp_path / "log")
    disk, _ = two_segments(directory)
    try:
        take = SnapshotWrite(Snapshot(6, 2, b"state at 6"), install=False)
        FileRaftLog.write_snapshot(disk.begin_snapshot(take))
        disk.install_snapshot(Snapshot(20, 3, b"leader state"))
        assert not disk.end_snapshot(take)
        assert (disk.start_offset, disk.end_offset) == (20, 20)
        assert snapshot_names(directory) == [snapshot_file_name(20, 3)]
    finally:
        disk.close()


def test_snapshots_adopted_while_a_flush_is_under_way(tmp_path) -> None:
    """A take may drop segments a flush is fsyncing (it has duplicates of their
    descriptors), and the flush still claims what it fsynced; an install voids the
    claim of a flush of the old log."""
    directory = str(tmp_path / "log")
    disk, _ = two_segments(directory)
    try:
        disk.append([Entry(2, (record(8),)), Entry(2, (record(9),))])
        token = disk.begin_flush()
        disk.take_snapshot(Snapshot(6, 2, b"state at 6"))  # drops the segment at 0
        assert [s.base_offset for s in disk.log.segments] == [4]
        disk.fsync(token)
        disk.end_flush(token)
        assert disk.flushed_end_offset == 10

        disk.append([Entry(2, (record(10),))])
        token = disk.begin_flush()
        disk.install_snapshot(Snapshot(30, 3, b"leader state"))
        disk.fsync(token)
        disk.end_flush(token)
        assert (disk.flushed_end_offset, disk.end_offset) == (30, 30)
    finally:
        disk.close()


def test_a_crash_between_writing_a_taken_snapshot_and_adopting_it(tmp_path) -> None:
    """The snapshot is on disk, the log still holds what it covers: the next start
    adopts it, and the log is what ``end_snapshot`` would have made it."""
    directory = str(tmp_path / "log")
    disk, memory = two_segments(directory)
    take = SnapshotWrite(Snapshot(6, 2, b"state at 6"), install=False)
    FileRaftLog.write_snapshot(disk.begin_snapshot(take))
    disk.close()  # the process dies before end_snapshot
    memory.end_snapshot(take)
    reopened = FileRaftLog(directory, 1, [1, 2, 3], meta, clock=CLOCK)
    try:
        assert_same(reopened, memory, 3)
        assert snapshot_names(directory) == [snapshot_file_name(6, 2)]
        reopened.append([Entry(3, (record(9),))])  # and it goes on from there
        memory.append([Entry(3, (record(9),))])
        assert_same(reopened, memory, 4)
    finally:
        reopened.close()


def test_a_crash_while_a_taken_snapshot_is_written_keeps_the_previous_state(
        tmp_path) -> None:
    directory = str(tmp_path / "log")
    disk, memory = two_segments(directory)
    name = os.path.join(directory, snapshot_file_name(6, 2))
    with open(name + ".part", "wb") as f:
        f.write(b"torn")  # the write had begun, not the rename
    disk.close()
    reopened = FileRaftLog(directory, 1, [1, 2, 3], meta, clock=CLOCK)
    try:
        assert_same(reopened, memory, 3)
        assert snapshot_names(directory) == [snapshot_file_name(2, 1)]
    finally:
        reopened.close()


@pytest.mark.parametrize("crash", ["writing the snapshot", "removing the old log",
                                   "before end_snapshot"])
def test_a_crash_while_installing_a_snapshot_leaves_a_consistent_log(tmp_path,
                                                                     crash) -> None:
    """Marker, snapshot and the old log's removal are each durable before the next step:
    a start after a crash at any of them finds the old log whole, or the snapshot with
    nothing of the old log (which may have diverged from the leader's)."""
    directory = str(tmp_path / "log")
    disk, memory = two_segments(directory, node_id=2)
    install = SnapshotWrite(Snapshot(20, 3, b"leader state"), install=True)
    files = disk.begin_snapshot(install)
    if crash == "writing the snapshot":
        write_atomically(os.path.join(directory, INSTALL_MARKER), b"20")
        with open(os.path.join(directory, files.name + ".part"), "wb") as f:
            f.write(b"torn")
    elif crash == "removing the old log":
        FileRaftLog.write_snapshot(dataclasses.replace(files, old_files=files.old_files[:2]))
        memory.end_snapshot(install)
    else:
        FileRaftLog.write_snapshot(files)
        memory.end_snapshot(install)
    disk.close()
    reopened = FileRaftLog(directory, 2, [1, 2, 3], meta, clock=CLOCK)
    try:
        assert_same(reopened, memory, 4)
        assert not os.path.exists(os.path.join(directory, INSTALL_MARKER))
        assert not [n for n in os.listdir(directory) if n.endswith(".part")]
        if crash != "writing the snapshot":
            assert snapshot_names(directory) == [snapshot_file_name(20, 3)]
            assert reopened.last_epoch == 3
    finally:
        reopened.close()


def test_entries_after_an_installed_snapshot_survive_once_flushed(tmp_path) -> None:
    """The marker's removal is made durable by the first flush after the install (it
    fsyncs the directory of the new segment): until then a start would drop the new
    entries, which nobody was told are durable; after it, they stay."""
    directory = str(tmp_path / "log")
    disk, _ = two_segments(directory, node_id=2)
    disk.install_snapshot(Snapshot(20, 3, b"leader state"))
    disk.append([Entry(3, (record(20),)), Entry(4, (record(21),))])
    token = disk.begin_flush()
    assert directory in [os.readlink(f"/proc/self/fd/{fd}") for fd in token.fds]
    disk.fsync(token)
    disk.end_flush(token)
    assert disk.flushed_end_offset == 22
    disk.close()
    reopened = FileRaftLog(directory, 2, [1, 2, 3], meta, clock=CLOCK)
    try:
        assert (reopened.start_offset, reopened.end_offset, reopened.last_epoch) == (20, 22, 4)
        assert reopened.epoch_at(20) == 3
        assert reopened.end_offset_for_epoch(3) == (3, 21)
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


def test_voters_records_are_control_batches_the_replica_reads_back_after_a_restart(
        tmp_path: pytest.TempPathFactory) -> None:
    """KIP-853: a voter change is a KRAFT_VOTERS control batch in __cluster_metadata,
    and a snapshot taken under kraft.version 1 records the set at its end after its
    header (as Kafka's do), so a restarted replica finds its voters in its log."""
    directory = str(tmp_path)
    one = VoterSet((VoterNode(ReplicaKey(1, "AAAAAAAAAAAAAAAAAAAAAQ"),
                              (Endpoint("CONTROLLER", "127.0.0.1", 9093),)),))
    two = VoterSet((*one.nodes, VoterNode(ReplicaKey(2, "AAAAAAAAAAAAAAAAAAAAAg"),
                                          (Endpoint("CONTROLLER", "127.0.0.1", 9094),))))
    log = FileRaftLog(directory, 1, [1], meta, CLOCK)
    log.append([Entry(1, None), Entry(1, (record(1),)), Entry(1, two), Entry(1, (record(2),))])
    log.flush()
    raw = log.read(2, 1)[0].raw
    assert raw is not None
    pos, header = next(scan_batches(raw))
    assert header.is_control
    assert control_record_type(decode_records(raw, pos, header)[0].key) == KRAFT_VOTERS
    assert [e.payload for e in entries_of(raw, meta)] == [two]
    log.close()

    reopened = FileRaftLog(directory, 1, [1], meta, CLOCK)
    replica = RaftReplica(1, one, reopened, random.Random(0),
                          directory_id="AAAAAAAAAAAAAAAAAAAAAQ", kraft_version=1)
    assert replica.voter_set == two and replica.voter_set_at(1) == one
    replica.high_watermark = replica.applied = 4
    assert replica.create_snapshot(4, encode_snapshot([record(1), record(2)], NOW))
    write = replica.take_snapshot_write()
    assert write is not None and write.snapshot.voters == two
    reopened.write_snapshot(reopened.begin_snapshot(write))
    replica.snapshot_written(write, 0)
    assert snapshot_voters(reopened.snapshot.data) == two  # type: ignore[union-attr]
    assert decode_snapshot(reopened.snapshot.data).records == [record(1), record(2)]  # type: ignore[union-attr]
    reopened.close()
    again = FileRaftLog(directory, 1, [1], meta, CLOCK)
    assert again.snapshot is not None and again.snapshot.voters == two
    assert RaftReplica(1, one, again, random.Random(0), kraft_version=1).voter_set == two
    again.close()


def test_a_new_leader_writes_its_updated_voter_in_the_leader_change_batch(
        tmp_path: pytest.TempPathFactory) -> None:
    """Kafka's LeaderState.appendStartOfEpochControlRecords at kraft.version 1: a leader
    whose own node the voter set has on another port starts its epoch with one control
    batch of three records, the LeaderChangeMessage, the KRaftVersionRecord and the
    VotersRecord with its node as it is now; a restarted replica reads the set back."""
    directory = str(tmp_path)
    old = Endpoint("CONTROLLER", "127.0.0.1", 9093)
    new = Endpoint("CONTROLLER", "127.0.0.1", 9193)
    key = ReplicaKey(1, "AAAAAAAAAAAAAAAAAAAAAQ")
    bootstrap = VoterSet((VoterNode(key, (old,)),))
    log = FileRaftLog(directory, 1, [1], meta, CLOCK)
    log.append([Entry(1, bootstrap)])  # the set in the log, naming the old port
    log.flush()
    leader = RaftReplica(1, bootstrap, log, random.Random(0), directory_id=key.directory_id,
                         kraft_version=1, local_listeners=(new,))
    leader.start(0)
    assert leader.is_leader and log.end_offset == 4
    (start,) = log.read(1, 1)
    assert start.raw is not None and start.count == 3
    pos, header = next(scan_batches(start.raw))
    assert header.is_control and (header.base_offset, header.last_offset) == (1, 3)
    assert [control_record_type(r.key) for r in decode_records(start.raw, pos, header)] == [
        LEADER_CHANGE, KRAFT_VERSION, KRAFT_VOTERS]
    moved = VoterSet((VoterNode(key, (new,)),))
    log.flush()
    leader.tick(1)
    assert leader.voter_set == moved and leader.high_watermark == 4
    log.close()
    again = FileRaftLog(directory, 1, [1], meta, CLOCK)
    replica = RaftReplica(1, bootstrap, again, random.Random(0),
                          directory_id=key.directory_id, kraft_version=1)
    assert replica.voter_set == moved and replica.voter_set_at(0) == bootstrap
    again.close()
