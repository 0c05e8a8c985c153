"""An in-memory replicated log with a snapshot prefix and the epoch lookups Raft needs.

Entries are batches: each spans ``entry.count`` offsets, so offsets are record offsets
as in Kafka's metadata log, and every offset Raft works with (fetch, truncation, the
high watermark, snapshots) is an entry boundary. The simulation uses this class
directly; the node's driver puts the same interface over the ``__cluster_metadata``
partition log and its ``.checkpoint`` snapshot files.
"""

from __future__ import annotations

import bisect

from ottla.raft.messages import Entry, Snapshot, SnapshotWrite


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._bases: list[int] = []
        """The base offset of each entry."""
        self.start_offset = 0
        """Offsets below this live only in ``snapshot``."""
        self.snapshot: Snapshot | None = None

    @property
    def end_offset(self) -> int:
        if self.entries:
            return self._bases[-1] + self.entries[-1].count
        return self.start_offset

    @property
    def flushed_end_offset(self) -> int:
        """Memory is as durable as this log gets: everything appended counts."""
        return self.end_offset

    @property
    def last_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def _index(self, offset: int) -> int:
        """The position of the entry starting at ``offset`` (``len`` at the end)."""
        if offset == self.end_offset:
            return len(self.entries)
        i = bisect.bisect_left(self._bases, offset)
        if i == len(self._bases) or self._bases[i] != offset:
            raise IndexError(f"offset {offset} is not an entry boundary of "
                             f"[{self.start_offset}, {self.end_offset})")
        return i

    def epoch_at(self, offset: int) -> int:
        if offset < self.start_offset:
            if self.snapshot is not None and offset == self.snapshot.end_offset - 1:
                return self.snapshot.epoch
            raise IndexError(f"offset {offset} is below the log start {self.start_offset}")
        if offset >= self.end_offset:
            raise IndexError(f"offset {offset} is beyond the log end {self.end_offset}")
        return self.entries[bisect.bisect_right(self._bases, offset) - 1].epoch

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        for entry in entries:
            self._bases.append(self.end_offset)
            self.entries.append(entry)

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        i = self._index(offset)
        return tuple(self.entries[i:i + max_entries])

    def entries_between(self, start: int, end: int) -> list[Entry]:
        return self.entries[self._index(start):self._index(end)]

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise IndexError(f"cannot truncate to {offset}, below the snapshot at "
                             f"{self.start_offset}")
        # Every entry holding an offset >= ``offset`` goes, as in the file log (and
        # Kafka's): a leader's epoch may end inside one of this log's batches.
        i = bisect.bisect_left(self._bases, offset)
        if i > 0 and self._bases[i - 1] + self.entries[i - 1].count > offset:
            i -= 1
        del self.entries[i:]
        del self._bases[i:]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: the largest epoch <= ``epoch`` in the log and
        the offset where it ends (the start of the next epoch, or the log end)."""
        if epoch >= self.last_epoch:
            return self.last_epoch, self.end_offset
        lo, hi = 0, len(self.entries)
        while lo < hi:  # entries are in epoch order: the last one with epoch <= epoch
            mid = (lo + hi) // 2
            if self.entries[mid].epoch <= epoch:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            return self.entries[lo - 1].epoch, self._bases[lo]
        if self.snapshot is not None and self.snapshot.epoch <= epoch:
            return self.snapshot.epoch, self.start_offset
        return 0, 0

    def end_snapshot(self, write: SnapshotWrite) -> bool:
        """Adopt a snapshot once the driver has made it durable (memory has nothing to
        write, so this is the whole of it): ``install`` replaces the log, a take drops
        the entries it covers. False if a newer snapshot came first (nothing changes)."""
        snapshot = write.snapshot
        if write.install:
            self.entries = []
            self._bases = []
        elif snapshot.end_offset <= self.start_offset:
            return False
        else:
            i = self._index(snapshot.end_offset)
            del self.entries[:i]
            del self._bases[:i]
        self.start_offset = snapshot.end_offset
        self.snapshot = snapshot
        return True

    def take_snapshot(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` and drop the entries it covers (the log start moves)."""
        self.end_snapshot(SnapshotWrite(snapshot, install=False))

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """A follower far behind replaces its whole log with the leader's snapshot."""
        self.end_snapshot(SnapshotWrite(snapshot, install=True))

    def flush(self) -> None:
        """Nothing to do in memory."""
