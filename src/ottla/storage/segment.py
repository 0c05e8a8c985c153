"""One log segment: a ``.log`` file of record batches with its two indexes.

Writes go straight to the file descriptor (``os.pwrite``, no user-space buffer), so once
``append`` returns the bytes are in the kernel's page cache and survive a kill -9 of the
process; only ``flush`` (fsync) makes them survive a power loss. The segment never
decodes records on the append or read path: it reads batch headers to find positions.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ottla.common.files import fsync_path
from ottla.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecord,
    check_batch,
    decode_records,
    read_header,
)
from ottla.storage.index import CorruptIndex, OffsetIndex, TimeIndex
from ottla.storage.transaction_index import TransactionIndex

if TYPE_CHECKING:
    from ottla.storage.page_cache import PageCacheWindow

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_RECOVERY_CHUNK = 8 * 1024 * 1024


def segment_file(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


@dataclass(slots=True)
class FileSlice:
    """A byte range of a segment file: what a fetch returns without copying records.

    The network layer hands the kernel a read-only mapping of it (``map``), so the bytes
    go from the page cache to the socket without passing through Python objects. It may
    be sent a loop turn after the read (a delayed fetch), so it remembers its segment: if
    that segment was closed meanwhile, the descriptor number may name another file.
    """

    fd: int
    position: int
    length: int
    segment: LogSegment | None = None

    def __len__(self) -> int:
        return self.length

    @property
    def valid(self) -> bool:
        return self.segment is None or self.segment.fd == self.fd

    def read(self) -> bytes:
        data = os.pread(self.fd, self.length, self.position)
        segment = self.segment
        if segment is not None and segment.page_cache is not None:
            segment.page_cache.read(segment, self.fd, self.position, self.length)
        return data

    def map(self) -> memoryview | None:
        """The bytes as a read-only view of the page cache: a mapping of just this range,
        unmapped when the last view of it is dropped. None if the file no longer holds
        the whole range (truncated after the read).

        Only the kernel should read the view (a socket write): a file truncated while
        mapped turns a user-space read of the lost pages into SIGBUS, where the kernel's
        own copy fails with EFAULT and the connection closes."""
        start = self.position - self.position % mmap.ALLOCATIONGRANULARITY
        try:
            window = mmap.mmap(self.fd, self.position + self.length - start,
                               prot=mmap.PROT_READ, offset=start)
        except (ValueError, OSError):  # past the end of the file now
            return None
        segment = self.segment
        if segment is not None and segment.page_cache is not None:
            segment.page_cache.served(window, segment, self.fd, start,
                                      self.position + self.length - start)
        return memoryview(window)[self.position - start:]


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, index_max_bytes: int,
                 index_interval_bytes: int, created_ms: int, preallocate_bytes: int = 0,
                 roll_jitter_ms: int = 0) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        """segment.jitter.ms: this segment rolls this much before segment.ms."""
        self.path = segment_file(directory, base_offset, LOG_SUFFIX)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        if self.size == 0 and preallocate_bytes > 0:
            # log.preallocate: reserve the whole segment now; writes go at the logical
            # size, and the file is trimmed to it on roll and close (a crash leaves zeros
            # that recovery truncates like any torn tail).
            os.posix_fallocate(self.fd, 0, preallocate_bytes)
        self.index = OffsetIndex(segment_file(directory, base_offset, INDEX_SUFFIX),
                                 base_offset, index_max_bytes)
        self.time_index = TimeIndex(segment_file(directory, base_offset, TIME_INDEX_SUFFIX),
                                    base_offset, index_max_bytes)
        self.txn_index = TransactionIndex(segment_file(directory, base_offset, TXN_INDEX_SUFFIX),
                                          base_offset)
        """The transactions aborted by markers in this segment (its file made on the
        first)."""
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp: int | None = None
        self.created_ms = created_ms
        self._bytes_since_index_entry = 0
        self.page_cache: PageCacheWindow | None = None
        """The node's drop-behind policy, if it has one (``log.page.cache.window.bytes``)."""
        self.cold_below = self.size
        """Bytes below this position are not kept in the page cache (with a policy)."""

    # --- writing ---------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int,
               offset_of_max_timestamp: int) -> int:
        """Append whole batches ending at ``last_offset``; return their file position."""
        position = self.size
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], position + written)
        self.size += len(view)
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = offset_of_max_timestamp
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += len(view)
        self.next_offset = last_offset + 1
        if self.page_cache is not None:
            self.page_cache.appended(self)
        return position

    def flush(self) -> None:
        os.fsync(self.fd)
        self.index.flush()
        self.time_index.flush()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; return the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        self.cold_below = min(self.cold_below, position)
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._bytes_since_index_entry = 0
        self._reload_tail()
        return removed

    # --- reading ---------------------------------------------------------------------

    def read_at(self, position: int, length: int) -> bytes:
        return os.pread(self.fd, length, position)

    def iter_headers(self, start_position: int = 0, end_position: int | None = None,
                     chunk: int = 64 * 1024):
        """Yield (position, header) of each complete batch, reading only headers' chunks."""
        end = self.size if end_position is None else min(end_position, self.size)
        pos = start_position
        while pos + HEADER_SIZE <= end:
            buf = os.pread(self.fd, min(chunk, end - pos), pos)
            p = 0
            while p + HEADER_SIZE <= len(buf):
                header = read_header(buf, p)
                if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + p + header.size > end:
                    return
                yield pos + p, header
                p += header.size
            if p == 0:
                return
            pos += p

    def translate_offset(self, offset: int, start_position: int = 0
                         ) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        _, position = self.index.lookup(offset)
        position = max(position, start_position)
        for pos, header in self.iter_headers(position,
                                             chunk=max(8192, 2 * self.index_interval_bytes)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, max_position: int | None = None,
             min_one_batch: bool = True) -> FileSlice | None:
        """The slice of whole batches from the one holding ``offset``, up to ``max_bytes``.

        As in Kafka, the slice may end inside a batch when ``max_bytes`` cuts it; clients
        drop a partial trailing batch. With ``min_one_batch`` the first batch is returned
        whole even if it is larger than ``max_bytes`` (KIP-74); without, a first batch
        larger than ``max_bytes`` gives nothing (Kafka's ReplicaManager drops a read whose
        first entry is incomplete: a fetcher given part of one batch cannot progress).
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, header = found
        limit = self.size if max_position is None else min(max_position, self.size)
        if position >= limit:
            return None
        if not min_one_batch and max_bytes < header.size:
            return None
        size = max(max_bytes, header.size) if min_one_batch else max_bytes
        length = min(limit - position, size)
        if length <= 0:
            return None
        return FileSlice(self.fd, position, length, self)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int
                                 ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp``."""
        indexed = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(indexed, start_offset))
        for pos, header in self.iter_headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                data = self.read_at(pos, header.size)
                for record in decode_records(data, 0, header):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return record.timestamp, record.offset
        return None

    # --- loading and recovery -------------------------------------------------------

    def load(self) -> None:
        """Open an existing segment after a clean shutdown: trust the indexes, read the tail."""
        try:
            self.index.load()
            self.time_index.load()
        except CorruptIndex:
            self.recover()
            return
        if self.index.offsets and self.index.positions[-1] >= self.size:
            self.recover()
            return
        ts, offset = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        self._reload_tail()

    def _reload_tail(self) -> None:
        """Recompute next offset and max timestamp by reading from the last index entry."""
        _, position = self.index.lookup(2**63 - 1)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.next_offset = self.base_offset
        for _, header in self.iter_headers(position):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self.first_batch_timestamp = None
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = read_header(self.read_at(0, HEADER_SIZE)).max_timestamp

    def recover(self, start_offset: int | None = None) -> int:
        """Check every batch (CRC-32C, structure, increasing offsets), rebuild both indexes,
        and truncate the file at the first invalid batch; return the bytes truncated."""
        self.index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.first_batch_timestamp = None
        self._bytes_since_index_entry = 0
        next_offset = self.base_offset if start_offset is None else start_offset
        pos = 0
        valid_end = 0
        file_size = os.fstat(self.fd).st_size
        while pos < file_size:
            buf = os.pread(self.fd, min(_RECOVERY_CHUNK, file_size - pos), pos)
            p = 0
            try:
                while p + LOG_OVERHEAD <= len(buf):
                    if p + HEADER_SIZE > len(buf):
                        break
                    header = read_header(buf, p)
                    if header.size > len(buf) - p:
                        if pos + p + header.size <= file_size and p == 0:
                            buf = os.pread(self.fd, header.size, pos)
                        else:
                            break
                    check_batch(buf, p)
                    if header.base_offset < next_offset:
                        raise CorruptRecord("offsets go backwards")
                    self._index_batch(header, pos + p)
                    next_offset = header.next_offset
                    p += header.size
                    valid_end = pos + p
            except CorruptRecord:
                break
            if p == 0:
                break
            pos += p
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.next_offset = next_offset if valid_end else self.base_offset
        return truncated

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    # --- lifecycle -------------------------------------------------------------------

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp

    def should_roll(self, batch_size: int, segment_bytes: int, now_ms: int, segment_ms: int,
                    next_offset: int, batch_max_timestamp: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: full (bytes, an index, relative offsets), or
        older than ``segment.ms`` (less its jitter) by the time the records carry: the new
        batch's max timestamp less the segment's first batch's, or, when the segment has
        no timestamp, now less its creation. Measuring record time against record time is
        what keeps a replay of old data (a backfill) from rolling at every batch."""
        if self.size == 0:
            return False
        if self.size + batch_size > segment_bytes:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        if next_offset - self.base_offset > 2**31 - 1:
            return True
        first = self.first_batch_timestamp
        waited = batch_max_timestamp - first if first is not None and first >= 0 \
            else now_ms - self.created_ms
        return waited > segment_ms - self.roll_jitter_ms

    def reset_indexes(self) -> None:
        self.index.reset()
        self.time_index.reset()

    def trim(self) -> None:
        """Cut a preallocated file down to the bytes written."""
        if self.fd >= 0 and os.fstat(self.fd).st_size > self.size:
            os.ftruncate(self.fd, self.size)

    def close(self) -> None:
        if self.fd >= 0:
            self.trim()
            os.close(self.fd)
            self.fd = -1
        self.index.close()
        self.time_index.close()

    def relocate(self, directory: str) -> None:
        """Its directory was renamed (``Log.rename_dir``): the paths follow."""
        self.directory = directory
        self.path = segment_file(directory, self.base_offset, LOG_SUFFIX)
        self.index.path = segment_file(directory, self.base_offset, INDEX_SUFFIX)
        self.time_index.path = segment_file(directory, self.base_offset, TIME_INDEX_SUFFIX)
        self.txn_index.path = segment_file(directory, self.base_offset, TXN_INDEX_SUFFIX)

    def files(self) -> tuple[str, str, str]:
        return self.path, self.index.path, self.time_index.path

    def all_files(self) -> tuple[str, ...]:
        """Every file of the segment, the aborted-transaction index included (which a
        cleaned copy keeps: offsets do not move)."""
        return (*self.files(), self.txn_index.path)

    def rename_to_deleted(self, with_txn_index: bool = True) -> list[str]:
        """Step one of deleting a segment: its files get the ``.deleted`` suffix (a start
        removes such leftovers); the descriptor stays open for reads in progress. The
        cleaner's swap keeps the aborted-transaction index (``with_txn_index=False``)."""
        renamed = []
        for path in self.all_files() if with_txn_index else self.files():
            try:
                os.rename(path, path + DELETED_SUFFIX)
                renamed.append(path + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return renamed

    def delete(self) -> None:
        self.close()
        for path in self.all_files():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def complete_swaps(directory: str) -> list[int]:
    """On start: finish swaps a crash interrupted (``.swap`` is a complete cleaned
    segment) and drop unfinished ``.cleaned`` files. Returns the swapped base offsets,
    whose indexes must be rebuilt."""
    swapped = []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(path)
        elif name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            final = path[: -len(SWAP_SUFFIX)]
            stem = final[: -len(LOG_SUFFIX)]
            for old in (stem + ".index", stem + ".timeindex"):
                if os.path.exists(old):
                    os.unlink(old)
            os.replace(path, final)
            swapped.append(int(os.path.basename(stem)))
    if swapped:
        fsync_path(directory)
    return swapped
