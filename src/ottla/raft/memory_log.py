"""An in-memory replicated log with the epoch lookups Raft needs.

The simulation uses it directly; the node's driver puts the same interface over the
``__cluster_metadata`` partition log (where ``Entry`` is a record batch and the epoch is
the batch's partition leader epoch).
"""

from __future__ import annotations

from ottla.raft.messages import Entry


class MemoryLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def epoch_at(self, offset: int) -> int:
        return self.entries[offset].epoch

    def append(self, entries: list[Entry] | tuple[Entry, ...]) -> None:
        self.entries.extend(entries)

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        return tuple(self.entries[offset:offset + max_entries])

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: the largest epoch <= ``epoch`` in the log and
        the offset where it ends (the start of the next epoch, or the log end)."""
        if epoch >= self.last_epoch:
            return self.last_epoch, self.end_offset
        # Entries are epoch-ordered: find the last entry whose epoch <= epoch.
        lo, hi = 0, len(self.entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entries[mid].epoch <= epoch:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return 0, 0
        return self.entries[lo - 1].epoch, lo
