"""Kafka's ShareCoordinatorOffsetsManager: the first ``__share_group_state`` offset a
reload still needs. Every share-partition's state starts at its latest snapshot, so each
record below the oldest of those snapshots is redundant and the log may be truncated
there (DeleteRecords).

Only committed records count: a snapshot above the high watermark could still be lost in
a leader change, and the records before it would then be needed again.
"""

from __future__ import annotations

from collections import deque

from ottla.coordinator.share.state import SharePartitionKey


class SnapshotOffsets:
    def __init__(self) -> None:
        self._latest: dict[SharePartitionKey, int] = {}
        """Each live share-partition's latest committed snapshot."""
        self._uncommitted: deque[tuple[int, SharePartitionKey, bool]] = deque()
        self._last_redundant: int | None = None

    def add(self, offset: int, key: SharePartitionKey, tombstone: bool) -> None:
        """A snapshot (or the tombstone that ends the share-partition) at ``offset``."""
        self._uncommitted.append((offset, key, tombstone))

    def on_committed(self, high_watermark: int) -> None:
        while self._uncommitted and self._uncommitted[0][0] < high_watermark:
            offset, key, tombstone = self._uncommitted.popleft()
            self._latest[key] = offset
            self._last_redundant = min(self._latest.values())
            if tombstone:  # nothing after a deletion needs what came before it
                del self._latest[key]

    def last_redundant_offset(self) -> int | None:
        """Every record below this offset is redundant; None when nothing is (Kafka
        answers empty for 0 too)."""
        if self._last_redundant is None or self._last_redundant <= 0:
            return None
        return self._last_redundant
