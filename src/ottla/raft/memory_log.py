"""An in-memory replicated log with a snapshot prefix and the epoch lookups Raft needs.

The simulation uses it directly; the node's driver puts the same interface over the
``__cluster_metadata`` partition log and its ``.checkpoint`` snapshot files (where an
entry is a record batch and its epoch the batch's partition leader epoch).
"""

from __future__ import annotations

from ottla.raft.messages import Entry, Snapshot


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.start_offset = 0
        """Offsets below this live only in ``snapshot``."""
        self.snapshot: Snapshot | None = None

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    @property
    def last_epoch(self) -> int:
        if self.entries:
            return self.entries[-1].epoch
        return self.snapshot.epoch if self.snapshot is not None else 0

    def epoch_at(self, offset: int) -> int:
        if offset < self.start_offset:
            if self.snapshot is not None and offset == self.snapshot.end_offset - 1:
                return self.snapshot.epoch
            raise IndexError(f"offset {offset} is below the log start {self.start_offset}")
        return self.entries[offset - self.start_offset].epoch

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        self.entries.extend(entries)

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        i = offset - self.start_offset
        return tuple(self.entries[i:i + max_entries])

    def entries_between(self, start: int, end: int) -> list[Entry]:
        return self.entries[start - self.start_offset:end - self.start_offset]

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise IndexError(f"cannot truncate to {offset}, below the snapshot at "
                             f"{self.start_offset}")
        del self.entries[offset - self.start_offset:]

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
            return self.entries[lo - 1].epoch, self.start_offset + lo
        if self.snapshot is not None and self.snapshot.epoch <= epoch:
            return self.snapshot.epoch, self.start_offset
        return 0, 0

    def take_snapshot(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` and drop the entries it covers (the log start moves)."""
        self.entries = self.entries[snapshot.end_offset - self.start_offset:]
        self.start_offset = snapshot.end_offset
        self.snapshot = snapshot

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """A follower far behind replaces its whole log with the leader's snapshot."""
        self.entries = []
        self.start_offset = snapshot.end_offset
        self.snapshot = snapshot
