"""The leader epoch cache: the start offset of each leader epoch in a partition's log.

It answers OffsetForLeaderEpoch (where did epoch N end?), which is how followers and
consumers detect a log that diverged after a leader change (KIP-101, KIP-320). It is kept
in ``leader-epoch-checkpoint`` in the partition directory.

A new epoch is recorded on the first append of a new leader, on the request path. As in
Kafka since KAFKA-15046, a partition log saves the file there without fsync (an fsync
under heavy writeback stalled the event loop for tens to hundreds of milliseconds) and
fsyncs it with its segments in ``Log.flush``, off the loop; after a crash, recovery
re-reads the epochs of the batches above the recovery point from their headers.
"""

from __future__ import annotations

import bisect
import os

from ottla.common.files import fsync_path
from ottla.storage.checkpoint import read_checkpoint, write_checkpoint

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, directory: str, sync: bool = True) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.sync = sync
        """fsync every save; without it the owner calls ``fsync`` when it flushes."""
        self.unflushed = False
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

    def end_offset_for_leader_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as a Kafka partition leader answers OffsetForLeaderEpoch and
        checks a fetcher's last fetched epoch: ``epoch_end_offset``."""
        return epoch_end_offset(self.entries, epoch, log_end_offset)

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
        write_checkpoint(self.path, self.entries, sync=self.sync)
        self.unflushed = not self.sync

    def fsync(self) -> bool:
        """fsync the file if a save since the last call did not; True if it did (the
        directory, which holds the renamed file's name, is then the caller's to fsync)."""
        if not self.unflushed:
            return False
        self.unflushed = False
        try:
            fsync_path(self.path)
        except FileNotFoundError:
            return False
        return True


def earliest_epoch(entries: list[tuple[int, int]], log_start_offset: int) -> int:
    """The epoch ListOffsets EARLIEST answers with the log start offset (Kafka's
    ``UnifiedLog.fetchOffsetByTimestamp``): the first known epoch if it starts at or below
    the log start, which the cache's truncation from the start keeps true; else unknown,
    as for a log whose first batches came before any epoch was recorded."""
    if entries and entries[0][1] <= log_start_offset:
        return entries[0][0]
    return UNDEFINED_EPOCH


def epoch_end_offset(entries: list[tuple[int, int]], epoch: int, log_end_offset: int
                     ) -> tuple[int, int]:
    """(epoch, end offset) for ``epoch`` in a log whose epochs start at ``entries``
    ((epoch, start offset), ascending), as Kafka's ``LeaderEpochFileCache.endOffsetFor``:
    the latest epoch ends at the log end; an epoch above every known one is undefined;
    one below every known epoch ends where the first known one starts (its data is gone:
    the fetcher replicates from the start); otherwise the largest epoch at or below it,
    ending where the next one starts."""
    if epoch < 0:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if entries and entries[-1][0] == epoch:
        return epoch, log_end_offset
    index = bisect.bisect_right([e for e, _ in entries], epoch)
    if index == len(entries):
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    higher_start = entries[index][1]
    if index == 0:
        return epoch, higher_start
    return entries[index - 1][0], higher_start
