"""The Raft log on disk: ``__cluster_metadata-0`` in Kafka's format, for RaftReplica.

Each entry is one record in a batch of its own, whose partition leader epoch is the
entry's epoch: a metadata record (``ottla.metadata.records``) or, for the ``None``
payload a new leader appends, a LEADER_CHANGE control record. One batch per entry keeps
every entry boundary a batch boundary, so Raft may truncate at any offset (Kafka's
replicas instead copy the leader's batches as they are, which the driver will do when
entries become batches). The log's leader-epoch cache answers ``end_offset_for_epoch``
exactly as OffsetForLeaderEpoch does. ``flush`` fsyncs: a replica must flush before it acknowledges
entries (a Fetch at a higher offset) or a vote.

Snapshots (``<offset>-<epoch>.checkpoint`` files) are not written here yet: ``snapshot``
stays None and the log start stays where retention left it.
"""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from ottla.metadata import records as meta
from ottla.protocol.records import build_batch, decode_records, read_header, scan_batches
from ottla.raft.messages import Entry, Snapshot
from ottla.storage.log import Log
from ottla.storage.log_config import LogConfig

METADATA_TOPIC = "__cluster_metadata"
LEADER_CHANGE = 2
_READ_BYTES = 1 << 20


def _leader_change(leader_id: int, voters: list[int]) -> tuple[bytes, bytes]:
    message = LeaderChangeMessage(version=i16(0), leader_id=i32(leader_id),
                                  voters=tuple(Voter(voter_id=i32(v)) for v in voters),
                                  granting_voters=())
    buf = io.BytesIO()
    entity_writer(LeaderChangeMessage)(buf, message)
    return struct.pack(">hh", 0, LEADER_CHANGE), buf.getvalue()


class FileRaftLog:
    """The MemoryLog interface over a partition log directory."""

    snapshot: Snapshot | None = None

    def __init__(self, directory: str, leader_id: int, voters: list[int], now_ms: int) -> None:
        self.log = Log(directory, METADATA_TOPIC, 0, LogConfig.resolve(), now_ms=now_ms)
        self.leader_id = leader_id  # who a LEADER_CHANGE record names when we append one
        self.voters = sorted(voters)
        self.now_ms = now_ms

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_epoch(self) -> int:
        return max(self.log.leader_epoch_cache.latest_epoch, 0)

    def epoch_at(self, offset: int) -> int:
        return self.log.leader_epoch_cache.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        found, end = self.log.leader_epoch_cache.end_offset_for(epoch, self.end_offset)
        return (0, 0) if found < 0 else (found, end)

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        for entry in entries:
            self._append_batch(entry)

    def _append_batch(self, entry: Entry) -> None:
        if entry.payload is None:
            record = _leader_change(self.leader_id, self.voters)
        else:
            record = (None, meta.encode(entry.payload))
        batch = bytearray(build_batch([record], timestamp=self.now_ms,
                                      control=entry.payload is None))
        self.log.append_as_leader(batch, read_header(batch, 0), entry.epoch, self.now_ms)

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        result: list[Entry] = []
        while len(result) < max_entries and offset < self.end_offset:
            info = self.log.read(offset, _READ_BYTES)
            if info.records is None:
                break
            data = info.records.read()
            for pos, header in scan_batches(data):
                epoch = header.partition_leader_epoch
                for record in decode_records(data, pos, header):
                    if record.offset < offset or len(result) >= max_entries:
                        continue
                    payload = None if header.is_control else meta.decode(bytes(record.value))
                    result.append(Entry(epoch, payload))
                offset = max(offset, header.last_offset + 1)
        return tuple(result)

    def entries_between(self, start: int, end: int) -> list[Entry]:
        return list(self.read(start, end - start))

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise IndexError(f"cannot truncate to {offset}, below the log start "
                             f"{self.start_offset}")
        self.log.truncate_to(offset)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()

    def take_snapshot(self, snapshot: Snapshot) -> Any:
        raise NotImplementedError("metadata snapshots on disk come with the Raft driver")

    install_snapshot = take_snapshot
