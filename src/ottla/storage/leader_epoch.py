"""The leader epoch cache: the start offset of each leader epoch in a partition's log.

It answers OffsetForLeaderEpoch (where did epoch N end?), which is how followers and
consumers detect a log that diverged after a leader change (KIP-101, KIP-320). It is kept
in ``leader-epoch-checkpoint`` in the partition directory.
"""

from __future__ import annotations

import os

from ottla.storage.checkpoint import read_checkpoint, write_checkpoint

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.entries: list[tuple[int, int]] = []
        try:
            self.entries = [(int(e), int(o)) for e, o in read_checkpoint(self.path)]
        except (ValueError, OSError):
            self.entries = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (called on the first append)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries = [(e, o) for e, o in self.entries if o < start_offset]
        self.entries.append((epoch, start_offset))
        self.save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for a requested epoch, as OffsetForLeaderEpoch answers it.

        The end offset of an epoch is the start offset of the next larger epoch, or the log
        end offset for the latest one; for an epoch we never saw, the largest smaller epoch
        is used; below the first epoch the answer is undefined.
        """
        if not self.entries or epoch < self.entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch >= self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        for i, (e, _start) in enumerate(self.entries):
            nxt_epoch, nxt_start = self.entries[i + 1]
            if e <= epoch < nxt_epoch:
                return e, nxt_start
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # pragma: no cover - loop always returns

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the leader that wrote ``offset`` (-1 if unknown)."""
        epoch = UNDEFINED_EPOCH
        for e, start in self.entries:
            if start > offset:
                break
            epoch = e
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self.save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch holding it now starts there."""
        kept = [(e, o) for e, o in self.entries if o >= start_offset]
        older = [(e, o) for e, o in self.entries if o < start_offset]
        if older and (not kept or kept[0][1] > start_offset):
            kept.insert(0, (older[-1][0], start_offset))
        if kept != self.entries:
            self.entries = kept
            self.save()

    def save(self) -> None:
        write_checkpoint(self.path, self.entries)
