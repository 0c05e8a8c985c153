"""The sparse offset index (``.index``) and time index (``.timeindex``) of a segment.

Both are Kafka's file formats: ``.index`` holds 8-byte entries (offset relative to the
segment's base int32, file position int32); ``.timeindex`` 12-byte entries (timestamp
int64, relative offset int32). An entry is added every ``index.interval.bytes`` of appended
data, so a lookup lands at most that many bytes before the batch it wants.

The entries live in memory (arrays) and are appended to the file as they are made, so the
file is always exactly its entries; ``segment.index.bytes`` bounds how many a segment may
hold. Indexes are not fsynced on their own: after an unclean shutdown the indexes of the
segments that are recovered are rebuilt from the log, as Kafka does.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndex(Exception):
    pass


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: str, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def _read_all(self) -> bytes:
        size = os.fstat(self._fd).st_size
        return os.pread(self._fd, size, 0) if size else b""

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions, sparsely."""

    entry = _OFFSET_ENTRY

    def __init__(self, path: str, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.offsets = array("q")
        self.positions = array("q")

    def load(self) -> None:
        """Read the entries from disk; raise ``CorruptIndex`` if they are inconsistent."""
        data = self._read_all()
        if len(data) % self.entry.size:
            raise CorruptIndex(f"{self.path}: size {len(data)} is not a multiple of 8")
        self.offsets = array("q")
        self.positions = array("q")
        for rel, pos in self.entry.iter_unpack(data):
            if rel < 0 or pos < 0 or (self.offsets and (
                    rel <= self.offsets[-1] - self.base_offset or pos <= self.positions[-1])):
                raise CorruptIndex(f"{self.path}: entries are not increasing")
            self.offsets.append(self.base_offset + rel)
            self.positions.append(pos)

    @property
    def is_full(self) -> bool:
        return len(self.offsets) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self.offsets[-1] if self.offsets else self.base_offset

    def append(self, offset: int, position: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            return
        self.offsets.append(offset)
        self.positions.append(position)
        os.write(self._fd, self.entry.pack(offset - self.base_offset, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last entry at or before ``offset``: (offset, position), or (base, 0)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.offsets[i], self.positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for offsets >= ``offset``."""
        i = bisect.bisect_left(self.offsets, offset)
        if i == len(self.offsets):
            return
        del self.offsets[i:]
        del self.positions[i:]
        os.ftruncate(self._fd, i * self.entry.size)

    def reset(self) -> None:
        self.offsets = array("q")
        self.positions = array("q")
        os.ftruncate(self._fd, 0)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.offsets, self.positions))


class TimeIndex(_IndexFile):
    """Maps timestamps to offsets: entries with increasing timestamps and offsets."""

    entry = _TIME_ENTRY

    def __init__(self, path: str, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self.timestamps = array("q")
        self.offsets = array("q")

    def load(self) -> None:
        data = self._read_all()
        if len(data) % self.entry.size:
            raise CorruptIndex(f"{self.path}: size {len(data)} is not a multiple of 12")
        self.timestamps = array("q")
        self.offsets = array("q")
        for ts, rel in self.entry.iter_unpack(data):
            if rel < 0 or (self.offsets and (ts < self.timestamps[-1]
                                             or self.base_offset + rel < self.offsets[-1])):
                raise CorruptIndex(f"{self.path}: entries are not increasing")
            self.timestamps.append(ts)
            self.offsets.append(self.base_offset + rel)

    @property
    def is_full(self) -> bool:
        return len(self.offsets) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset)."""
        if not self.offsets:
            return -1, self.base_offset
        return self.timestamps[-1], self.offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one's."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        if self.offsets and offset < self.offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        os.write(self._fd, self.entry.pack(timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> int:
        """The offset of the last entry whose timestamp is <= ``timestamp`` (or the base)."""
        i = bisect.bisect_right(self.timestamps, timestamp) - 1
        return self.base_offset if i < 0 else self.offsets[i]

    def truncate_to(self, offset: int) -> None:
        i = bisect.bisect_left(self.offsets, offset)
        if i == len(self.offsets):
            return
        del self.offsets[i:]
        del self.timestamps[i:]
        os.ftruncate(self._fd, i * self.entry.size)

    def reset(self) -> None:
        self.timestamps = array("q")
        self.offsets = array("q")
        os.ftruncate(self._fd, 0)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.timestamps, self.offsets))
