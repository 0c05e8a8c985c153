"""The log cleaner: compaction of ``cleanup.policy=compact`` logs (seed 002, Kafka's
LogCleaner).

A pass builds a map key -> latest offset over the dirty part of a log (from the cleaner
checkpoint to the first segment it may not touch: the active segment, or one younger
than ``min.compaction.lag.ms``) and rewrites every segment below that point keeping only
each key's latest record. Offsets are preserved (the log gets gaps).

Tombstones and transaction markers go as Kafka (KIP-534) lets them go: the first pass
that keeps a tombstone, or a marker whose transaction has no data batch left, rewrites
its batch with the delete-horizon flag (attribute bit 6) and the base timestamp set to
now + ``delete.retention.ms`` (record deltas shifted so each record's timestamp is
unchanged); a pass at or after that horizon removes them. A horizon already in a batch,
written by Kafka or by an earlier pass, is honoured as it stands. As in Kafka, nothing
schedules a pass for a horizon: the tombstones go with the first pass after it that the
dirty ratio or ``max.compaction.lag.ms`` brings.

Each rewritten segment is swapped in so that a crash after any file operation leaves a
readable log with no acknowledged live record lost:

1. write ``<base>.log.cleaned`` and fsync it (a crash: the leftover is deleted on start);
2. rename it to ``<base>.log.swap`` and fsync the directory (from here on the start
   completes the swap);
3. rename the old segment's files to ``.deleted``;
4. rename ``.swap`` to ``<base>.log`` and fsync the directory;
5. rebuild the offset and time indexes from the new file.

What Kafka's LogCleaner and LogCleanerManager gauges read is kept here: when ``pick``
last looked for work, the dirtiest ratio it saw and how far past
``max.compaction.lag.ms`` the most overdue log was when it chose one, and the last
pass's ``CleanStats`` (its time and the bytes it read and wrote).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ottla.common.files import fsync_path
from ottla.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    Record,
    build_batch,
    control_record_type,
    decode_records,
    scan_batches,
)
from ottla.storage.checkpoint import read_offsets, write_offsets
from ottla.storage.log import Log
from ottla.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_INT64_MAX = 2**63 - 1


@dataclass(slots=True)
class CleanStats:
    """What a cleaning pass did (for logs and the benchmark)."""

    log: str
    segments_rewritten: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_kept: int = 0
    records_dropped: int = 0
    horizons_set: int = 0
    """Batches given a delete horizon in this pass."""
    first_dirty: int = 0
    end: int = 0
    bytes_recopied: int = 0
    """Bytes of the segments the pass went through to rewrite them (Kafka's bytesRead;
    ``bytes_read`` is what the key map was built from)."""
    elapsed_s: float = 0.0
    """From the start of ``prepare`` to the end of ``commit``."""

    def recopy_percent(self) -> int:
        """The share of what the pass read that it wrote back, as Kafka's
        cleaner-recopy-percent truncates it."""
        return int(100 * self.bytes_written / max(self.bytes_recopied, 1))


@dataclass(slots=True)
class CleanPlan:
    tp: Any
    log: Log
    stats: CleanStats
    swaps: list[tuple[LogSegment, str]] = field(default_factory=list)
    """(old segment, path of its cleaned ``.swap`` copy)."""
    started: float = 0.0
    """The cleaner's clock when ``prepare`` began."""


def cleanable_end(lg: Log, now_ms: int) -> int:
    """The offset below which the cleaner may work: not the active segment, nothing above
    the high watermark or the first offset of an open transaction (Kafka's
    firstUncleanableOffset: undecided records may yet be aborted), nothing younger than
    ``min.compaction.lag.ms``."""
    lag = lg.config["min.compaction.lag.ms"]
    end = lg.active_segment.base_offset
    unstable = lg.first_unstable_offset()
    for segment in lg.segments[:-1]:
        too_young = lag > 0 and segment.largest_timestamp > now_ms - lag
        if too_young or segment.next_offset > lg.high_watermark or \
                (unstable is not None and segment.next_offset > unstable):
            return segment.base_offset
    return end


def compaction_delay_ms(lg: Log, first_dirty: int, now_ms: int) -> int:
    """How long ago the oldest dirty record should have been compacted: now less
    ``max.compaction.lag.ms`` less the earliest first-batch timestamp of the segments
    from the first dirty one to the active one (0 if none is overdue), as Kafka's
    LogCleanerManager.maxCompactionDelay."""
    stamps = [s.first_batch_timestamp for s in lg.segments[:-1]
              if s.next_offset > first_dirty and s.first_batch_timestamp is not None
              and s.first_batch_timestamp > 0]
    clean_until = now_ms - max(lg.config["max.compaction.lag.ms"], 0)
    return clean_until - min(stamps) if stamps and min(stamps) < clean_until else 0


class _Aborted:
    """Which transactional batches were aborted (from the logs' .txnindex files): their
    records are removed and never count as a key's latest value (Kafka's
    CleanedTransactionMetadata with the aborted transactions of the range)."""

    def __init__(self, lg: Log, start: int, end: int) -> None:
        self.ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in lg.collect_aborted(start, end):
            self.ranges.setdefault(txn.producer_id, []).append(
                (txn.first_offset, txn.last_offset))

    def holds(self, header: BatchHeader) -> bool:
        """Whether ``header`` is a data batch of an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last
                   for first, last in self.ranges.get(header.producer_id, ()))


class LogCleaner:
    def __init__(self, logs: Callable[[], dict[Any, Log]],
                 crash_hook: Callable[[str], None] | None = None, *, now_ms: int = 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logs = logs
        self.crash_hook = crash_hook or (lambda step: None)
        """Called after each file operation of a swap; tests raise from it to crash."""
        self.first_dirty: dict[Any, int] = {}
        self._loaded_dirs: set[str] = set()
        self.clock = clock
        """Seconds, for the time a pass takes."""
        self.last_run_ms = now_ms
        """When ``pick`` last looked for a log to clean (at first: when created)."""
        self.max_dirty_ratio = 0.0
        """The dirtiest compacted log's ratio at the last ``pick``."""
        self.max_compaction_delay_ms = 0
        """At the last ``pick`` that chose a log: the largest ``compaction_delay_ms``."""
        self.last_stats = CleanStats("")
        """The last pass that cleaned something."""

    # --- checkpoint --------------------------------------------------------------------

    def _dir_of(self, lg: Log) -> str:
        return os.path.dirname(lg.dir)

    def _load_checkpoint(self, lg: Log) -> None:
        parent = self._dir_of(lg)
        if parent in self._loaded_dirs:
            return
        self._loaded_dirs.add(parent)
        for tp, offset in read_offsets(os.path.join(parent, CLEANER_CHECKPOINT)).items():
            self.first_dirty.setdefault(tp, offset)

    def _write_checkpoint(self, lg: Log) -> None:
        parent = self._dir_of(lg)
        offsets = {tp: off for tp, off in self.first_dirty.items()
                   if tp in self.logs() and self._dir_of(self.logs()[tp]) == parent}
        write_offsets(os.path.join(parent, CLEANER_CHECKPOINT), offsets)

    # --- choosing a log ------------------------------------------------------------------

    def dirty_ratio(self, tp: Any, lg: Log, now_ms: int) -> tuple[float, int, int]:
        """(dirty bytes / cleanable bytes, first dirty offset, cleanable end)."""
        self._load_checkpoint(lg)
        first_dirty = max(self.first_dirty.get(tp, 0), lg.log_start_offset)
        end = cleanable_end(lg, now_ms)
        total = dirty = 0
        for segment in lg.segments:
            if segment.base_offset >= end:
                break
            total += segment.size
            if segment.next_offset > first_dirty:
                dirty += segment.size
        return (dirty / total if total else 0.0), first_dirty, end

    def maybe_clean(self, now_ms: int) -> CleanStats | None:
        """Clean, in this thread, the log ``pick`` chooses."""
        chosen = self.pick(now_ms)
        return None if chosen is None else self.clean(*chosen, now_ms)

    def pick(self, now_ms: int) -> tuple[Any, Log] | None:
        """The compacted log that needs cleaning most, if any is dirty enough (or has a
        record older than ``max.compaction.lag.ms`` still uncleaned)."""
        self.last_run_ms = now_ms
        best: tuple[float, Any, Log] | None = None
        max_ratio = 0.0
        max_delay = 0
        for tp, lg in self.logs().items():
            if "compact" not in lg.config["cleanup.policy"] or lg.offline:
                continue
            ratio, first_dirty, end = self.dirty_ratio(tp, lg, now_ms)
            max_ratio = max(max_ratio, ratio)
            max_delay = max(max_delay, compaction_delay_ms(lg, first_dirty, now_ms))
            if first_dirty >= end:
                continue
            overdue = any(s.first_batch_timestamp is not None and
                          s.first_batch_timestamp >= 0 and
                          now_ms - s.first_batch_timestamp > lg.config["max.compaction.lag.ms"]
                          for s in lg.segments if first_dirty < s.next_offset and
                          s.base_offset < end)
            if ratio >= lg.config["min.cleanable.dirty.ratio"] or overdue:
                score = 2.0 if overdue else ratio
                if best is None or score > best[0]:
                    best = (score, tp, lg)
        self.max_dirty_ratio = max_ratio
        if best is None:
            return None
        self.max_compaction_delay_ms = max_delay
        return best[1], best[2]

    # --- cleaning -------------------------------------------------------------------------

    def clean(self, tp: Any, lg: Log, now_ms: int) -> CleanStats:
        """One whole cleaning pass, in the caller's thread."""
        return self.commit(self.prepare(tp, lg, now_ms))

    def prepare(self, tp: Any, lg: Log, now_ms: int) -> CleanPlan:
        """The slow half, safe on a worker thread: read the segments (through descriptors
        of its own), build the cleaned copies and leave them as ``.swap`` files. It
        changes nothing the event loop uses; ``commit`` installs the result."""
        started = self.clock()
        _, first_dirty, end = self.dirty_ratio(tp, lg, now_ms)
        plan = CleanPlan(tp, lg, CleanStats(lg.name, first_dirty=first_dirty, end=end),
                         started=started)
        if first_dirty >= end:
            return plan
        segments = [s for s in lg.segments if s.base_offset < end]
        contents = {s.base_offset: _read_file(s.path, s.size) for s in segments}
        aborted = _Aborted(lg, segments[0].base_offset if segments else 0, end)
        latest = self._offset_map(segments, contents, first_dirty, end, aborted, plan.stats)
        horizon = min(now_ms + lg.config["delete.retention.ms"], _INT64_MAX)
        txns = _TransactionTracker()
        for segment in segments:
            data = contents[segment.base_offset]
            plan.stats.bytes_recopied += len(data)
            rewritten = self._rewrite(lg, data, latest, now_ms, horizon, txns, aborted,
                                      plan.stats)
            if rewritten is None:
                plan.stats.bytes_written += len(data)
                continue
            plan.swaps.append((segment, self._write_swap(lg, segment, rewritten)))
            plan.stats.bytes_written += len(rewritten)
        return plan

    def commit(self, plan: CleanPlan) -> CleanStats:
        """The quick half, on the event loop: swap the cleaned segments in (those that
        retention or DeleteRecords removed meanwhile are dropped) and checkpoint."""
        lg = plan.log
        for old, swap in plan.swaps:
            if old not in lg.segments:
                os.unlink(swap)
                continue
            old.rename_to_deleted(with_txn_index=False)
            self.crash_hook("old-deleted")
            os.rename(swap, old.path)
            fsync_path(lg.dir)
            self.crash_hook("swap-installed")
            lg.replace_segment(old)
            self.crash_hook("indexes-rebuilt")
            plan.stats.segments_rewritten += 1
        if plan.stats.first_dirty < plan.stats.end:
            self.first_dirty[plan.tp] = plan.stats.end
            self._write_checkpoint(lg)
            stats = plan.stats
            stats.elapsed_s = self.clock() - plan.started
            self.last_stats = stats
            log.info("Cleaned %s up to offset %d: %d segments rewritten, %d records kept, "
                     "%d dropped, %d batches given a delete horizon", lg.name, stats.end,
                     stats.segments_rewritten, stats.records_kept, stats.records_dropped,
                     stats.horizons_set)
        return plan.stats

    def _offset_map(self, segments: list[LogSegment], contents: dict[int, bytes],
                    first_dirty: int, end: int, aborted: _Aborted, stats: CleanStats
                    ) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for segment in segments:
            if segment.next_offset <= first_dirty:
                continue
            data = contents[segment.base_offset]
            stats.bytes_read += len(data)
            for pos, header in scan_batches(data):
                if header.is_control or aborted.holds(header):
                    continue
                for record in decode_records(data, pos, header):
                    if record.key is not None and first_dirty <= record.offset < end:
                        latest[record.key] = record.offset
        return latest

    def _rewrite(self, lg: Log, data: bytes, latest: dict[bytes, int], now_ms: int,
                 new_horizon: int, txns: _TransactionTracker, aborted: _Aborted,
                 stats: CleanStats) -> bytes | None:
        """The segment's batches with aborted transactions' data, superseded records, and
        tombstones and markers past their batch's delete horizon, removed, and a horizon
        (``new_horizon``) set on each batch that keeps a tombstone or an empty
        transaction's marker without one yet;
        None if nothing would change. This is Kafka's ``MemoryRecords.filterTo`` with the
        cleaner's filter."""
        out = bytearray()
        changed = False
        for pos, header in scan_batches(data):
            raw = data[pos:pos + header.size]
            horizon = header.delete_horizon_ms
            records = decode_records(data, pos, header)
            if aborted.holds(header):
                # An aborted transaction's data goes whole; its marker then has no data
                # left and follows the tombstones' horizon.
                stats.records_dropped += len(records)
                changed = True
                continue
            if header.is_control:
                # A marker is kept until no batch of its transaction is left, and then
                # until its horizon has passed (Kafka piggy-backs on tombstone retention).
                empty_txn = txns.on_marker(header, records)
                if empty_txn and horizon is not None and horizon <= now_ms \
                        and not _last_of_active_producer(lg, header):
                    stats.records_dropped += len(records)
                    changed = True
                    continue
                kept = records
                needs_horizon = empty_txn and bool(records)  # an empty header has no room
            else:
                txns.on_data(header)
                kept = [r for r in records if _keep(r, latest, horizon, now_ms)]
                needs_horizon = any(r.value is None for r in kept)
            stats.records_kept += len(kept)
            stats.records_dropped += len(records) - len(kept)
            set_horizon = needs_horizon and horizon is None
            if len(kept) == len(records) and not set_horizon:
                out += raw
                continue
            changed = True
            if not kept:
                continue
            if set_horizon:
                horizon = new_horizon
                stats.horizons_set += 1
            out += build_batch(
                [(r.key, r.value, r.headers) for r in kept],
                base_offset=header.base_offset, timestamp=[r.timestamp for r in kept],
                offset_deltas=[r.offset - header.base_offset for r in kept],
                compression=header.compression, producer_id=header.producer_id,
                producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                partition_leader_epoch=header.partition_leader_epoch,
                transactional=header.is_transactional, control=header.is_control,
                timestamp_type=header.timestamp_type, delete_horizon_ms=horizon)
        return bytes(out) if changed else None

    def _write_swap(self, lg: Log, old: LogSegment, data: bytes) -> str:
        cleaned = old.path + CLEANED_SUFFIX
        swap = old.path + SWAP_SUFFIX
        fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.crash_hook("cleaned-written")
        os.rename(cleaned, swap)
        fsync_path(lg.dir)
        self.crash_hook("swap-renamed")
        return swap


def _keep(record: Record, latest: dict[bytes, int], horizon: int | None, now_ms: int) -> bool:
    """Kafka's ``shouldRetainRecord``: the latest record of its key, and if a tombstone,
    its batch has no delete horizon yet or the horizon is still ahead."""
    if record.key is None:
        return True
    if latest.get(record.key, -1) > record.offset:
        return False  # a later record has the same key
    return record.value is not None or horizon is None or now_ms < horizon


def _last_of_active_producer(lg: Log, marker: BatchHeader) -> bool:
    """A marker that is all the log still says of a live producer (no data batch of its
    epoch remembered) is kept: it carries the epoch that fences the producer's zombies.
    Kafka keeps an empty batch header there; this keeps the marker whole."""
    entry = lg.producer_state.producers.get(marker.producer_id)
    return entry is not None and not entry.batches and \
        entry.producer_epoch == marker.producer_epoch


class _TransactionTracker:
    """Kafka's ``CleanedTransactionMetadata``, for a log without an aborted-transaction
    index: the producer ids with a transactional data batch since their last marker,
    followed from the start of the log through one cleaning pass."""

    def __init__(self) -> None:
        self.open: set[int] = set()

    def on_data(self, header: BatchHeader) -> None:
        if header.is_transactional:
            self.open.add(header.producer_id)

    def on_marker(self, header: BatchHeader, records: list[Record]) -> bool:
        """Whether no data batch of the marker's transaction is left (it may go)."""
        if not records:
            return True
        if control_record_type(records[0].key) not in (CONTROL_ABORT, CONTROL_COMMIT):
            return False
        had_data = header.producer_id in self.open
        self.open.discard(header.producer_id)
        return not had_data


def _read_file(path: str, size: int) -> bytes:
    """A segment's bytes through a descriptor of our own (the log's may be closed by the
    event loop meanwhile)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
