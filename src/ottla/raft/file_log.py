"""The Raft log on disk: ``__cluster_metadata-0`` in Kafka's format, for RaftReplica.

Each entry is one record batch whose partition leader epoch is the entry's epoch: the
records of one operation, made bytes by the ``RecordSerde`` the log is given (the node
gives ``ottla.metadata.records``: consensus does not know its payload), or, for the ``None``
payload a new leader appends, a LEADER_CHANGE control record. A follower appends the
leader's batches byte for byte (``Entry.raw``), as Kafka's replicas do, so every log of
the quorum holds the same bytes. The log's leader-epoch cache answers
``end_offset_for_epoch`` exactly as OffsetForLeaderEpoch does.

Durability: an append reaches the kernel at once; ``flushed_end_offset`` says how much
is fsynced, and RaftReplica acknowledges (a follower's Fetch offset) or counts (the
leader's own position toward the high watermark) only that much. A driver fsyncs off
the event loop with ``begin_flush`` / ``fsync`` / ``end_flush``; a truncation in between
voids the flush's claim; the flush after a segment roll fsyncs the directory too, so
the new segment's name survives a crash. (Indexes are not fsynced: recovery rebuilds
them.)

Snapshots are ``<end offset>-<epoch>.checkpoint`` files (20 and 10 digits) in the same
directory. RaftReplica decides which snapshot to take or install (a ``SnapshotWrite``);
writing it is slow, so it comes in three steps like a flush: ``begin_snapshot`` on the
event loop (paths and bytes), ``write_snapshot`` on a worker thread (everything that
must be durable, with every fsync) and ``end_snapshot`` back on the loop, where the log
adopts the snapshot. A snapshot is written whole to a ``.part`` file, fsynced, renamed
and its directory fsynced. A take then moves the log start to the snapshot's end and
drops the segments below it (the files they hold are in the snapshot, fsynced or not).
An install (a follower far behind) first writes the ``installing-snapshot`` marker,
then the snapshot, then removes the old log's files for good, all on the thread; on
the loop the log starts empty at the snapshot's end and the marker goes, which the next
flush makes durable (it fsyncs the directory of the new segment) before anything past
the snapshot is acknowledged.

On opening, the latest snapshot is the log's prefix; the bootstrap snapshot ``storage
format`` wrote (end offset 0) is not one. A crash anywhere leaves: the previous state
(before a snapshot's rename; ``.part`` files are deleted), or a snapshot the next start
adopts (a take: the log start is its end; an install: the marker makes the start drop
whatever of the old log is left). What survives a crash: the quorum-state file, every
flushed batch and every renamed snapshot.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import re
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from ottla.common.files import fsync_path, write_atomically
from ottla.common.topics import METADATA_TOPIC
from ottla.protocol.records import build_batch, decode_records, read_header, scan_batches
from ottla.raft.messages import (
    Entry,
    KRaftVersionUpgrade,
    LeaderChange,
    RecordSerde,
    Snapshot,
    SnapshotWrite,
)
from ottla.raft.voter_set import VoterSet
from ottla.raft.voters_record import (
    control_voters,
    snapshot_voters,
    start_of_epoch_batch,
    upgrade_batch,
    voters_batch,
    with_snapshot_voters,
)
from ottla.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig

LEADER_CHANGE = 2
_READ_BYTES = 1 << 20
INSTALL_MARKER = "installing-snapshot"
_SNAPSHOT_FILE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass(frozen=True)
class FlushToken:
    end_offset: int
    generation: int
    fds: list[int]
    """The segments' descriptors, then the directory's if a segment rolled."""
    segments: int = 0
    """How many of ``fds`` are segments'."""


@dataclass(frozen=True)
class SnapshotFiles:
    """What ``write_snapshot`` does off the event loop, all decided on it: paths and
    bytes only, so that the thread never touches the log."""

    directory: str
    name: str
    data: bytes
    end_offset: int
    install: bool
    old_files: tuple[str, ...] = ()
    """An install's: the old log's segments and epoch checkpoint, removed for good once
    the snapshot is durable (so no start after a crash can take them for the new log)."""


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def _leader_change(leader_id: int, voters: list[int]) -> tuple[bytes, bytes]:
    message = LeaderChangeMessage(version=i16(0), leader_id=i32(leader_id),
                                  voters=tuple(Voter(voter_id=i32(v)) for v in voters),
                                  granting_voters=())
    buf = io.BytesIO()
    entity_writer(LeaderChangeMessage)(buf, message)
    return struct.pack(">hh", 0, LEADER_CHANGE), buf.getvalue()


def entries_of(data: bytes | bytearray | memoryview, serde: RecordSerde) -> list[Entry]:
    """The entries of a run of record batches (a log read, a Fetch response)."""
    result = []
    for pos, header in scan_batches(data):
        raw = bytes(data[pos:pos + header.size])
        payload: tuple[object, ...] | VoterSet | KRaftVersionUpgrade | None
        if header.is_control:
            payload = control_voters(raw)  # a VotersRecord, or a leader change (None)
        else:
            payload = tuple(serde.decode(bytes(record.value))
                            for record in decode_records(raw, 0, header))
        result.append(Entry(header.partition_leader_epoch, payload,
                            header.last_offset - header.base_offset + 1, raw))
    return result


class FileRaftLog:
    """The MemoryLog interface over a partition log directory."""

    def __init__(self, directory: str, node_id: int, voters: list[int], serde: RecordSerde,
                 clock: Callable[[], float] = time.time) -> None:
        self.dir = directory
        self.serde = serde
        """How an entry's records become bytes and back: the log knows nothing of them."""
        os.makedirs(directory, exist_ok=True)
        self.node_id = node_id  # who a LEADER_CHANGE record names when we append one
        self.voters = sorted(voters)
        self.clock = clock
        self.snapshot: Snapshot | None = self._load_latest_snapshot()
        start = self.snapshot.end_offset if self.snapshot is not None else 0
        self.log = Log(directory, METADATA_TOPIC, 0, LogConfig.resolve(),
                       now_ms=self.now_ms, log_start_offset=start,
                       sync_epoch_checkpoint=True)  # its flushes bypass Log.flush
        if self.log.log_end_offset < start or self._install_interrupted():
            # A crash between writing an installed snapshot and resetting the log: what
            # the log holds may have diverged from the leader's, so it all goes.
            self.log.truncate_fully_and_start_at(start, self.now_ms)
        self._finish_install()
        self.log.flush()
        self.flushed_end_offset = self.log.log_end_offset
        self._generation = 0  # bumped by truncation: voids flushes begun before it
        self._voters_data: dict[tuple[int, int], bytes] = {}
        """Snapshots being written, with the voters Kafka puts after their header."""

    @property
    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- the MemoryLog interface -----------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_epoch(self) -> int:
        latest = self.log.leader_epoch_cache.latest_epoch
        if latest < 0:
            return self.snapshot.epoch if self.snapshot is not None else 0
        return latest

    def epoch_at(self, offset: int) -> int:
        if offset < self.start_offset:
            if self.snapshot is not None and offset == self.snapshot.end_offset - 1:
                return self.snapshot.epoch
            raise IndexError(f"offset {offset} is below the log start {self.start_offset}")
        return self.log.leader_epoch_cache.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found, end = self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)
        if self.snapshot is not None and self.snapshot.epoch <= epoch and \
                (found < 0 or found < self.snapshot.epoch):
            return self.snapshot.epoch, self.start_offset
        return (0, 0) if found < 0 else (found, end)

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        for entry in entries:
            batch = bytearray(entry.raw if entry.raw is not None else self._encode(entry))
            self.log.append_as_leader(batch, read_header(batch, 0), entry.epoch, self.now_ms)

    def _encode(self, entry: Entry) -> bytes:
        if entry.payload is None:
            return build_batch([_leader_change(self.node_id, self.voters)],
                               timestamp=self.now_ms, control=True)
        if isinstance(entry.payload, LeaderChange):
            return start_of_epoch_batch(_leader_change(self.node_id, self.voters),
                                        entry.payload.kraft_version, entry.payload.voters,
                                        self.now_ms)
        if isinstance(entry.payload, VoterSet):
            return voters_batch(entry.payload, self.now_ms)
        if isinstance(entry.payload, KRaftVersionUpgrade):
            return upgrade_batch(entry.payload.kraft_version, entry.payload.voters,
                                 self.now_ms)
        return build_batch([(None, self.serde.encode(record)) for record in entry.payload],
                           timestamp=self.now_ms)

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        result: list[Entry] = []
        while len(result) < max_entries and offset < self.end_offset:
            info = self.log.read(offset, _READ_BYTES)
            if info.records is None:
                break
            for entry in entries_of(info.records.read(), self.serde):
                if len(result) < max_entries:
                    result.append(entry)
                    offset += entry.count
        return tuple(result)

    def entries_between(self, start: int, end: int) -> list[Entry]:
        result: list[Entry] = []
        while start < end:
            chunk = self.read(start, 256)
            if not chunk:
                break
            for entry in chunk:
                if start >= end:
                    break
                result.append(entry)
                start += entry.count
        return result

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise IndexError(f"cannot truncate to {offset}, below the log start "
                             f"{self.start_offset}")
        self.log.truncate_to(offset)
        self._generation += 1
        self.flushed_end_offset = min(self.flushed_end_offset, self.end_offset)

    # --- durability ------------------------------------------------------------------

    def begin_flush(self) -> FlushToken:
        """What a flush started now may claim, and duplicates of the descriptors to
        fsync, so that ``fsync`` can run on a worker thread without touching the log."""
        segments = [segment for segment in self.log.segments
                    if segment.next_offset > self.flushed_end_offset]
        fds = [os.dup(segment.fd) for segment in segments]
        if any(segment.base_offset >= self.flushed_end_offset for segment in segments):
            # A segment rolled since the last flush: its name lives in the directory.
            fds.append(os.open(self.dir, os.O_RDONLY))
        return FlushToken(self.end_offset, self._generation, fds, len(segments))

    @staticmethod
    def fsync(token: FlushToken,
              timer: Callable[[Callable[[], None]], None] | None = None) -> None:
        """fsync the log's data files, and its directory after a roll (safe off the
        event loop); ``timer`` times each segment's fsync (Kafka's LogSegment.flush
        in LogFlushStats), not the directory's."""
        for i, fd in enumerate(token.fds):
            if timer is not None and i < token.segments:
                timer(functools.partial(os.fsync, fd))
            else:
                os.fsync(fd)

    def end_flush(self, token: FlushToken, durable: bool = True) -> None:
        """Back on the loop: close the duplicates and claim what was fsynced, unless the
        fsync failed or a truncation came in between."""
        for fd in token.fds:
            os.close(fd)
        if durable and token.generation == self._generation:
            end = min(token.end_offset, self.end_offset)
            self.flushed_end_offset = max(self.flushed_end_offset, end)
            self.log.recovery_point = max(self.log.recovery_point, end)

    def flush(self) -> None:
        token = self.begin_flush()
        try:
            self.fsync(token)
        finally:
            self.end_flush(token)

    def close(self) -> None:
        self.log.close()

    # --- snapshots -------------------------------------------------------------------

    def _load_latest_snapshot(self) -> Snapshot | None:
        found = []
        for name in os.listdir(self.dir):
            if name.endswith(".checkpoint.part"):
                os.unlink(os.path.join(self.dir, name))  # a write a crash interrupted
                continue
            match = _SNAPSHOT_FILE.match(name)
            if match and int(match.group(1)) > 0:
                found.append((int(match.group(1)), int(match.group(2))))
        if not found:
            return None
        end, epoch = max(found)
        with open(os.path.join(self.dir, snapshot_file_name(end, epoch)), "rb") as f:
            data = f.read()
        self._delete_snapshots_before(end)
        return Snapshot(end, epoch, data, snapshot_voters(data))

    def _delete_snapshots_before(self, end_offset: int) -> None:
        for name in os.listdir(self.dir):
            match = _SNAPSHOT_FILE.match(name)
            if match and 0 < int(match.group(1)) < end_offset:
                os.unlink(os.path.join(self.dir, name))

    def begin_snapshot(self, write: SnapshotWrite) -> SnapshotFiles:
        """On the loop: what ``write_snapshot`` is to write and remove. RaftReplica
        changes nothing of the log between this and ``end_snapshot`` of an install (it
        neither appends, truncates nor takes a snapshot meanwhile), so the list of the
        old log's files stays true."""
        snapshot = write.snapshot
        old_files: tuple[str, ...] = ()
        if write.install:
            old_files = tuple(path for segment in self.log.segments
                              for path in segment.files())
            old_files += (os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT),)
        data = bytes(snapshot.data)
        if snapshot.voters is not None:  # kraft.version 1: the set at its end, as Kafka
            data = with_snapshot_voters(data, snapshot.voters, self.now_ms)
            self._voters_data[(snapshot.end_offset, snapshot.epoch)] = data
        return SnapshotFiles(self.dir, snapshot_file_name(snapshot.end_offset, snapshot.epoch),
                             data, snapshot.end_offset, write.install,
                             old_files)

    @staticmethod
    def write_snapshot(files: SnapshotFiles) -> None:
        """The slow, durable part, safe off the event loop: each step is on disk before
        the next begins, so a crash between any two leaves a directory that opens
        consistently (see the module docstring)."""
        if files.install:
            write_atomically(os.path.join(files.directory, INSTALL_MARKER),
                             b"%d" % files.end_offset)
        path = os.path.join(files.directory, files.name)
        part = path + ".part"
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(files.data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(part, path)
        fsync_path(files.directory)
        if files.old_files:
            # The loop's log still has these open (reads work on unlinked files, and
            # nothing writes them now); they go before the marker does.
            for old in files.old_files:
                try:
                    os.unlink(old)
                except FileNotFoundError:
                    pass
            fsync_path(files.directory)

    def end_snapshot(self, write: SnapshotWrite) -> bool:
        """Back on the loop, once ``write_snapshot`` is done: adopt the snapshot. No
        fsync here: what this changes on disk is redone by the next start if a crash
        loses it. False if a newer snapshot came first (its file goes)."""
        snapshot = write.snapshot
        end = snapshot.end_offset
        data = self._voters_data.pop((end, snapshot.epoch), None)
        if data is not None:  # what the file holds is what the log serves
            snapshot = dataclasses.replace(snapshot, data=data)
        if write.install:
            self.snapshot = snapshot
            with self._epochs_unsynced():  # the old checkpoint is gone for good
                self.log.truncate_fully_and_start_at(end, self.now_ms)
            self._generation += 1  # voids a flush of the old log still under way
            self.flushed_end_offset = end
            self._delete_snapshots_before(end)
            self._finish_install()
            return True
        if end <= self.start_offset:
            if self.snapshot is None or self.snapshot.end_offset != end:
                try:
                    os.unlink(os.path.join(self.dir, snapshot_file_name(end, snapshot.epoch)))
                except FileNotFoundError:
                    pass
            return False
        self.snapshot = snapshot
        self.log.high_watermark = max(self.log.high_watermark, end)
        # The segments wholly below ``end`` go even if a flush is fsyncing them (it
        # holds duplicates of their descriptors) or never did: the snapshot has their
        # entries. ``flushed_end_offset`` stays: the next flush must still fsync the
        # directory of a segment made since the last one.
        with self._epochs_unsynced():  # the start recomputes it from the snapshot
            self.log.delete_records_before(end)
        self._delete_snapshots_before(end)
        return True

    @contextmanager
    def _epochs_unsynced(self) -> Iterator[None]:
        """Let the epoch cache save without fsync on the loop, where a commit needs no
        fsync (``end_snapshot``)."""
        cache = self.log.leader_epoch_cache
        cache.sync = False
        try:
            yield
        finally:
            cache.sync = True

    def take_snapshot(self, snapshot: Snapshot) -> None:
        """Write ``snapshot`` and drop the log before it, all at once (tests, tools)."""
        write = SnapshotWrite(snapshot, install=False)
        self.write_snapshot(self.begin_snapshot(write))
        self.end_snapshot(write)

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Replace the whole log with the leader's snapshot, all at once (tests, tools)."""
        write = SnapshotWrite(snapshot, install=True)
        self.write_snapshot(self.begin_snapshot(write))
        self.end_snapshot(write)

    def _install_interrupted(self) -> bool:
        """An install was under way and its snapshot got written: finish it."""
        try:
            with open(os.path.join(self.dir, INSTALL_MARKER), encoding="ascii") as f:
                end = int(f.read().strip() or -1)
        except (FileNotFoundError, ValueError):
            return False
        return self.snapshot is not None and self.snapshot.end_offset == end

    def _finish_install(self) -> None:
        try:
            os.unlink(os.path.join(self.dir, INSTALL_MARKER))
        except FileNotFoundError:
            pass
