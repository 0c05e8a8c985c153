"""A partition's log: an ordered list of segments, the last one active.

Offsets are assigned here, by rewriting the base offset of each appended batch. The log
tracks its start offset, its end offset (LEO), the high watermark its partition sets, the
recovery point (everything below it is fsynced) and the leader epoch cache.

Durability, as in Kafka: an append is written to the kernel before ``append_as_leader``
returns (it survives kill -9); fsync happens on segment roll (the rolled segment, off
the event loop), every ``flush.messages`` appends / ``flush.ms`` milliseconds, and on
clean shutdown; a flush that reaches a segment made since the last one fsyncs the
directory too, so that the segment's name survives a power loss as well as its bytes.
After an unclean shutdown every segment above the recovery point is re-read, each batch
CRC-checked, and the log truncated at the first bad batch.
"""

from __future__ import annotations

import base64
import bisect
import logging
import os
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ottla.common.files import fsync_path
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    CorruptRecord,
    check_batch,
    control_record_type,
    decode_records,
    marker_coordinator_epoch,
    read_header,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from ottla.storage.leader_epoch import LeaderEpochCache
from ottla.storage.log_config import LogConfig
from ottla.storage.page_cache import PageCacheWindow
from ottla.storage.producer_state import CompletedTxn, ProducerStateManager
from ottla.storage.segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    FileSlice,
    LogSegment,
    complete_swaps,
    segment_file,
)
from ottla.storage.transaction_index import AbortedTxn

log = logging.getLogger(__name__)

PARTITION_METADATA_FILE = "partition.metadata"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
"""A replica being moved to another log dir (AlterReplicaLogDirs) is filled in
``<topic>-<partition>.<uuid>-future`` there, as Kafka's ``UnifiedLog.logFutureDirName``."""


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def future_dir_name(topic: str, partition: int) -> str:
    return f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future log's directory name, or None."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    base, dot, tag = name[:-len(FUTURE_DIR_SUFFIX)].rpartition(".")
    return parse_log_dir_name(base) if dot and tag else None


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory name, or None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(slots=True)
class ReadInfo:
    """What a fetch of one partition gets: a byte range of one segment, or nothing."""

    records: FileSlice | None
    log_start_offset: int
    log_end_offset: int


class Log:
    def __init__(self, directory: str, topic: str, partition: int, config: LogConfig, *,
                 topic_id: uuid.UUID | None = None, now_ms: int, recovery_point: int = 0,
                 log_start_offset: int = 0, clean_shutdown: bool = False,
                 rng: random.Random | None = None, sync_epoch_checkpoint: bool = False
                 ) -> None:
        self.dir = directory
        self.rng = rng or random.Random()
        """Draws each segment's segment.jitter.ms."""
        self.topic = topic
        self.partition = partition
        self.config = config
        self.topic_id = topic_id
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.high_watermark = 0
        self.producer_state = ProducerStateManager()
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms
        self.on_roll: Callable[[Log, int], None] | None = None
        """Called with the new segment's base offset so the owner can fsync the old ones."""
        self.flush_timer: Callable[[Callable[[], None]], None] | None = None
        """Runs each segment's fsync and times it (the node's LogFlushStats, when it
        serves metrics); None: the fsync runs untimed."""
        self.offline = False
        self.on_io_error: Callable[[Log], None] | None = None
        self.page_cache: PageCacheWindow | None = None
        """What of its segments a log leaves in the page cache: all (None) or the
        newest window (``use_page_cache_window``)."""
        self.discard: Callable[[list[LogSegment]], None] = delete_segments
        """Removes segments cut from the log (DeleteRecords, truncation): at once by
        default; a log manager closes them and unlinks their files off the loop."""
        self._new_directory = not os.path.isdir(directory)
        """Its name in the log dir is made durable by the first flush."""
        os.makedirs(directory, exist_ok=True)
        self.leader_epoch_cache = LeaderEpochCache(directory, sync=sync_epoch_checkpoint)
        if topic_id is not None:
            self._write_partition_metadata(topic_id)
        self._load(now_ms, clean_shutdown)

    # --- loading ---------------------------------------------------------------------

    def _load(self, now_ms: int, clean_shutdown: bool) -> None:
        bases = []
        rebuild = set(complete_swaps(self.dir))  # a cleaner swap a crash interrupted
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, ".tmp")):
                os.unlink(path)
            elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[: -len(LOG_SUFFIX)]))
        for name in os.listdir(self.dir):  # indexes without a log are leftovers
            stem, ext = os.path.splitext(name)
            if ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and stem.isdigit() \
                    and int(stem) not in bases:
                os.unlink(os.path.join(self.dir, name))
        bases.sort()
        truncated_at: int | None = None
        recovered: list[LogSegment] = []
        for base in bases:
            if truncated_at is not None:
                # Everything after a corrupt batch is discarded, later segments included.
                LogSegment(self.dir, base, index_max_bytes=self.config.segment_index_bytes,
                           index_interval_bytes=self.config.index_interval_bytes,
                           created_ms=now_ms).delete()
                continue
            if not os.path.exists(segment_file(self.dir, base, INDEX_SUFFIX)):
                rebuild.add(base)
            segment = self._new_segment_object(base, now_ms)
            next_base = bases[bases.index(base) + 1] if base != bases[-1] else None
            needs_recovery = not clean_shutdown and (next_base is None
                                                     or next_base > self.recovery_point)
            if base in rebuild and not needs_recovery:
                segment.recover()
            elif needs_recovery:
                recovered.append(segment)
                removed = segment.recover()
                if removed:
                    log.warning("%s: truncated %d bytes of invalid data from segment %d",
                                self.name, removed, base)
                    truncated_at = segment.next_offset
            else:
                segment.load()
            self._add_segment(segment)
        if not self.segments:
            self._add_segment(self._new_segment_object(self.log_start_offset, now_ms))
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        for segment in recovered:
            # The epoch checkpoint is fsynced with the segments, so a crash may have lost
            # the entries of epochs that began above the recovery point: the batches
            # carry them.
            for _, header in segment.iter_headers():
                self.leader_epoch_cache.assign(header.partition_leader_epoch,
                                               header.base_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        reindexed = set(recovered) | {s for s in self.segments if s.base_offset in rebuild}
        for segment in reindexed:
            segment.txn_index.reset()  # rebuilt from the markers below
        self._rebuild_producer_state(reindexed)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def _rebuild_producer_state(self, reindex: set[LogSegment]) -> None:
        """Producer state (and the aborted-transaction index of the segments in
        ``reindex``) from the batch headers, reading only markers' records."""
        self.producer_state.truncate()
        for segment in self.segments:
            for position, header in segment.iter_headers():
                if header.producer_id < 0:
                    continue
                if header.is_control and header.is_transactional:
                    aborted, epoch = _marker(segment.read_at(position, header.size), 0, header)
                    self._end_transaction(header, aborted, epoch,
                                          segment if segment in reindex else None)
                else:
                    self.producer_state.update(header, header.base_offset, header.last_offset)

    def _end_transaction(self, header: BatchHeader, aborted: bool, coordinator_epoch: int,
                         segment: LogSegment | None) -> CompletedTxn:
        """A marker at ``header.base_offset`` closed its producer's transaction; an
        aborted one goes to ``segment``'s index with the last stable offset after it
        (Kafka's ``updateTxnIndex``)."""
        completed = self.producer_state.end_transaction(header, header.base_offset, aborted,
                                                        coordinator_epoch)
        if aborted and segment is not None:
            unstable = self.producer_state.first_unstable_offset()
            segment.txn_index.append(AbortedTxn(
                completed.producer_id, completed.first_offset, completed.last_offset,
                completed.last_offset + 1 if unstable is None else unstable))
        return completed

    def _segment_of(self, offset: int) -> LogSegment:
        return self.segments[max(0, bisect.bisect_right(self._bases, offset) - 1)]

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not yet decided for good: open, or
        closed by a marker the high watermark has not passed (None if there is none)."""
        return self.producer_state.unstable_below(self.high_watermark)

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), for a
        read_committed fetch (Kafka's ``collectAbortedTransactions``)."""
        found: list[AbortedTxn] = []
        index = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        for segment in self.segments[index:]:
            txns, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def _new_segment_object(self, base_offset: int, now_ms: int) -> LogSegment:
        jitter = self.config["segment.jitter.ms"]
        segment = LogSegment(self.dir, base_offset,
                          index_max_bytes=self.config.segment_index_bytes,
                          index_interval_bytes=self.config.index_interval_bytes,
                          created_ms=now_ms,
                          preallocate_bytes=self.config.segment_bytes
                          if self.config.preallocate else 0,
                          roll_jitter_ms=self.rng.randrange(min(jitter, self.config.segment_ms))
                          if jitter > 0 else 0)
        segment.page_cache = self.page_cache
        return segment

    def use_page_cache_window(self, policy: PageCacheWindow | None) -> None:
        """Keep only the newest bytes of each segment cached (``page_cache``)."""
        self.page_cache = policy
        for segment in self.segments:
            segment.page_cache = policy

    def _add_segment(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

    def _write_partition_metadata(self, topic_id: uuid.UUID) -> None:
        path = os.path.join(self.dir, PARTITION_METADATA_FILE)
        encoded = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
        text = f"version: 0\ntopic_id: {encoded}\n"
        try:
            with open(path, encoding="utf-8") as f:
                if f.read() == text:
                    return
        except FileNotFoundError:
            pass
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    # --- properties ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return log_dir_name(self.topic, self.partition)

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appending -------------------------------------------------------------------

    def append_as_leader(self, batch: bytearray, header: BatchHeader, leader_epoch: int,
                         now_ms: int) -> AppendInfo:
        """Append one validated client batch: assign its offsets and stamp its epoch."""
        if self.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{self.name} is offline")
        marker = None
        if header.is_control and header.is_transactional:
            # A COMMIT or ABORT marker from the transaction coordinator (WriteTxnMarkers).
            marker = _marker(batch, 0, header)
            self.producer_state.check_marker(header.producer_id, header.producer_epoch,
                                             marker[1])
        elif header.producer_id >= 0:
            duplicate = self.producer_state.check(header)
            if duplicate is not None:
                # As Kafka's UnifiedLog: the original batch's offsets, and its (max)
                # timestamp as the append time, which the Java producer reports.
                return AppendInfo(duplicate.first_offset, duplicate.last_offset,
                                  duplicate.timestamp, self.log_start_offset, duplicate=True)
        first = self.log_end_offset
        last = first + header.last_offset_delta
        set_base_offset(batch, 0, first)
        set_partition_leader_epoch(batch, 0, leader_epoch)
        append_time = -1
        max_timestamp = header.max_timestamp
        if self.config.log_append_time:
            set_log_append_time(batch, 0, now_ms)
            append_time = max_timestamp = now_ms
        self._append(batch, last, max_timestamp, now_ms)
        self.leader_epoch_cache.assign(leader_epoch, first)
        if marker is not None:
            self._end_transaction(read_header(batch), marker[0], marker[1],
                                  self.active_segment)
        elif header.producer_id >= 0:
            self.producer_state.update(header, first, last)
        return AppendInfo(first, last, append_time, self.log_start_offset)

    def append_as_follower(self, data: bytes | bytearray | memoryview, now_ms: int) -> int:
        """Append the leader's batches as they are (offsets, epochs, timestamps and
        producer ids kept), the complete ones of ``data`` (a partial batch at its end is
        ignored, as a fetch response may end in one); return how many were appended.
        A batch may start past the log end (the cleaner dropped whole batches from the
        leader's compacted log, as Kafka's follower accepts), never below it. A batch
        starting below the log end, or failing its CRC, is refused whole: the leader's
        log and this one must match byte for byte below the high watermark, so nothing
        is patched over."""
        if self.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{self.name} is offline")
        view = memoryview(data)
        appended = 0
        try:
            # The leader's read may end inside a batch (its byte limit cut it): that
            # tail is left for the next fetch. Every whole batch is checked before any
            # is appended, as Kafka validates the whole set first.
            batches = list(scan_batches(view))
            end = self.log_end_offset
            for position, header in batches:
                check_batch(view, position)
                if header.base_offset < end:
                    raise KafkaError(ErrorCode.unknown_server_error,
                                     f"{self.name}: the leader's batch at offset "
                                     f"{header.base_offset} starts below the log end "
                                     f"{end}")
                end = header.last_offset + 1
            if not batches:
                return 0
            # One write for the whole set, indexed at its first batch, as Kafka's
            # LogSegment.append does: a follower keeps up with one pwrite per fetch.
            first, last = batches[0], batches[-1]
            self._append(view[first[0]:last[0] + last[1].size], last[1].last_offset,
                         max(header.max_timestamp for _, header in batches), now_ms)
            for position, header in batches:
                self.leader_epoch_cache.assign(header.partition_leader_epoch,
                                               header.base_offset)
                if header.producer_id < 0:
                    continue
                if header.is_control and header.is_transactional:
                    aborted, epoch = _marker(view, position, header)
                    self._end_transaction(header, aborted, epoch,
                                          self._segment_of(header.base_offset))
                else:
                    self.producer_state.update(header, header.base_offset, header.last_offset)
            appended = len(batches)
        except CorruptRecord as e:
            raise KafkaError(ErrorCode.corrupt_message, f"{self.name}: {e}") from e
        return appended

    def _append(self, data: bytes | bytearray | memoryview, last_offset: int,
                max_timestamp: int, now_ms: int) -> None:
        try:
            self._maybe_roll(len(data), now_ms, last_offset + 1, max_timestamp)
            self.active_segment.append(data, last_offset, max_timestamp, last_offset)
        except OSError as e:
            self.fail(e)
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"{self.name}: write failed: {e}") from e
        self.unflushed_messages += 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, size: int, now_ms: int, next_offset: int, max_timestamp: int
                    ) -> None:
        segment = self.active_segment
        if segment.should_roll(size, self.config.segment_bytes, now_ms, self.config.segment_ms,
                               next_offset, max_timestamp):
            self.roll(now_ms)

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the log end offset."""
        base = self.log_end_offset
        if self.active_segment.base_offset == base and self.active_segment.size == 0:
            return self.active_segment
        self.active_segment.trim()
        if self.page_cache is not None:
            self.page_cache.rolled(self.active_segment)
        segment = self._new_segment_object(base, now_ms)
        segment.reset_indexes()  # a fresh segment: no stale index entries
        self._add_segment(segment)
        if self.on_roll is not None:
            self.on_roll(self, base)
        return segment

    def fail(self, error: OSError) -> None:
        """An I/O error: this log (and, through ``on_io_error``, its whole log dir) goes
        offline; clients get KAFKA_STORAGE_ERROR and the node keeps serving the rest."""
        if not self.offline:
            self.offline = True
            log.error("%s: I/O error, marking the log offline: %s", self.name, error)
            if self.on_io_error is not None:
                self.on_io_error(self)

    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment holding offsets below ``up_to`` (default: the log end)."""
        end = self.log_end_offset if up_to is None else up_to
        if end <= self.recovery_point:
            return
        new_files = False
        for segment in list(self.segments):
            if segment.next_offset > self.recovery_point and segment.base_offset < end:
                try:
                    if self.flush_timer is None:
                        segment.flush()
                    else:
                        self.flush_timer(segment.flush)
                except (OSError, ValueError):
                    return  # the segment was closed or deleted meanwhile
                new_files = new_files or segment.base_offset >= self.recovery_point
        if self.leader_epoch_cache.fsync() or new_files:
            # As Kafka's LocalLog.flush: a segment made since the last flush has a name
            # that is durable only once its directory is fsynced (and a new log's
            # directory only once the log dir is); so has a renamed epoch checkpoint.
            if self._new_directory:
                fsync_path(os.path.dirname(self.dir))
                self._new_directory = False
            fsync_path(self.dir)
        self.recovery_point = max(self.recovery_point, end)
        if up_to is None or up_to >= self.log_end_offset:
            self.unflushed_messages = 0

    # --- reading ---------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadInfo:
        """Batches from ``offset`` up to ``max_bytes``, never past ``max_offset``.

        Raises OFFSET_OUT_OF_RANGE outside [log start offset, log end offset].
        """
        if self.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"{self.name} is offline")
        leo = self.log_end_offset
        if offset < self.log_start_offset or offset > leo:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"Offset {offset} is out of range [{self.log_start_offset}, {leo}]"
                             f" for {self.name}")
        upper = leo if max_offset is None else min(max_offset, leo)
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        while i < len(self.segments) and offset < upper:
            segment = self.segments[i]
            if segment.next_offset <= max(offset, segment.base_offset):
                i += 1  # nothing at or after the offset here (empty, or it ends before)
                continue
            max_position = None
            if segment.next_offset > upper:
                found = segment.translate_offset(upper)
                max_position = found[0] if found else None
            # The segment holding the first batch at or after the offset: what it gives,
            # or nothing (a later segment's batches would skip that one).
            records = segment.read(offset, max_bytes, max_position, min_one_batch)
            return ReadInfo(records, self.log_start_offset, leo)
        return ReadInfo(None, self.log_start_offset, leo)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp`` (ListOffsets)."""
        for segment in self.segments:
            if segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3)."""
        best = (-1, -1)
        for segment in self.segments:
            if segment.max_timestamp > best[0]:
                best = (segment.max_timestamp, segment.offset_of_max_timestamp)
        if best[1] >= 0:
            # Segments track the last offset of the batch with the largest timestamp; find
            # the record itself.
            segment = self.segments[max(0, bisect.bisect_right(self._bases, best[1]) - 1)]
            found = segment.translate_offset(best[1])
            if found is not None:
                pos, header = found
                records = decode_records(segment.read_at(pos, header.size), 0, header)
                for record in records:
                    if record.timestamp == best[0]:
                        return record.timestamp, record.offset
        return best

    # --- deleting --------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset to ``offset`` (DeleteRecords); drop whole segments
        below it. Returns the new low watermark."""
        if offset > self.high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"Cannot delete records of {self.name} beyond the high watermark")
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        dropped = []
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            self._bases.pop(0)
            dropped.append(self.segments.pop(0))
        if dropped:
            self.discard(dropped)
        self.leader_epoch_cache.truncate_from_start(offset)
        return offset

    def retention_candidates(self, now_ms: int) -> list[LogSegment]:
        """The oldest segments that ``retention.ms`` or ``retention.bytes`` allow to delete
        (Kafka's ``UnifiedLog.deleteOldSegments``): only with ``cleanup.policy``
        containing ``delete``, only segments wholly below the high watermark, the active
        segment too (when it has records), never an empty active segment."""
        if "delete" not in self.config["cleanup.policy"]:
            return []
        retention_ms = self.config["retention.ms"]
        retention_bytes = self.config["retention.bytes"]
        doomed: list[LogSegment] = []
        active = self.active_segment
        candidates = [s for s in self.segments if s.next_offset <= self.high_watermark
                      and not (s is active and s.size == 0)]
        if retention_ms >= 0:
            for segment in candidates:
                newest = segment.largest_timestamp if segment.largest_timestamp >= 0 \
                    else segment.created_ms
                if now_ms - newest <= retention_ms:
                    break
                doomed.append(segment)
        if retention_bytes >= 0:
            excess = self.size - retention_bytes - sum(s.size for s in doomed)
            for segment in candidates[len(doomed):]:
                if excess < segment.size:
                    break
                doomed.append(segment)
                excess -= segment.size
        return doomed

    def delete_old_segments(self, now_ms: int) -> list[LogSegment]:
        """Apply retention: drop the segments it allows from the log, advance the log start
        offset past them and rename their files to ``.deleted``. The caller closes and
        unlinks them after ``file.delete.delay.ms`` (fetches may still read them)."""
        doomed = self.retention_candidates(now_ms)
        if doomed and len(doomed) == len(self.segments):
            # A log always has a segment: when every one has expired, a new empty one
            # takes over at the log end first (Kafka's deleteSegments), so the log start
            # offset moves to the log end offset.
            self.roll(now_ms)
        for segment in doomed:
            self.segments.remove(segment)
            self._bases.remove(segment.base_offset)
            segment.rename_to_deleted()
        if doomed:
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            log.info("%s: deleted %d segments by retention; log start offset is now %d",
                     self.name, len(doomed), self.log_start_offset)
        return doomed

    def replace_segment(self, old: LogSegment) -> LogSegment:
        """Install the file now at ``old``'s path (a cleaned copy, same base offset) in
        its place: rebuild its indexes, then drop the old segment's ``.deleted`` files."""
        index = self.segments.index(old)
        segment = self._new_segment_object(old.base_offset, old.created_ms)
        segment.recover()
        self.segments[index] = segment
        old.close()
        for path in old.files():
            try:
                os.unlink(path + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return segment

    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (a follower after divergence, or recovery)."""
        if offset >= self.log_end_offset:
            return
        dropped = []
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            self._bases.pop()
            dropped.append(self.segments.pop())
        if dropped:
            self.discard(dropped)
        self.active_segment.truncate_to(offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state(set())

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Drop every segment and start empty at ``offset`` (a replica that installed
        a snapshot in place of its log)."""
        for segment in self.segments:
            segment.delete()
        self.segments.clear()
        self._bases.clear()
        segment = self._new_segment_object(offset, now_ms)
        segment.reset_indexes()
        self._add_segment(segment)
        self.log_start_offset = self.recovery_point = self.high_watermark = offset
        self.leader_epoch_cache.entries = []
        self.leader_epoch_cache.save()
        self.producer_state.truncate()

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def rename_dir(self, directory: str) -> None:
        """Move the log's directory to ``directory`` (a future log taking the partition's
        name): the open files move with it, only the paths kept here change."""
        os.rename(self.dir, directory)
        self.dir = directory
        for segment in self.segments:
            segment.relocate(directory)
        self.leader_epoch_cache.path = os.path.join(
            directory, os.path.basename(self.leader_epoch_cache.path))

    def rename_for_deletion(self) -> str:
        """Close the log and move its directory aside (``<name>.<uuid>-delete``, as
        Kafka does) so that a new namesake can start at once; returns the path for the
        caller to remove, which a start also does with any it finds."""
        self.close()
        doomed = f"{self.dir}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(self.dir, doomed)
        except OSError:
            doomed = self.dir
        return doomed


def _marker(data: bytes | bytearray | memoryview, position: int, header: BatchHeader
            ) -> tuple[bool, int]:
    """(aborted, coordinator epoch) of the end-transaction marker batch at ``position``."""
    records = decode_records(data, position, header)
    kind = control_record_type(records[0].key) if records else None
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise KafkaError(ErrorCode.invalid_record,
                         f"a transactional control batch without a marker at offset "
                         f"{header.base_offset}")
    return kind == CONTROL_ABORT, marker_coordinator_epoch(records[0].value)


def delete_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.delete()
