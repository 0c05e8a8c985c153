"""Drop-behind: how much of each partition's newest data a broker leaves in the page cache.

Kafka leaves caching to the operating system: every byte a broker writes stays in the
page cache until memory runs short, so the cache grows by everything produced. That is
free where fresh memory is cheap. It is not in a virtual machine whose host backs guest
memory only once it is touched (a Firecracker guest with free page reporting, like the
machine the benchmarks run on): there a write into page-cache pages the guest has not
used lately runs at 0.35-0.5 GB/s, into pages it just freed at 1.4-1.7 GB/s, and a read
from disk into a growing cache at about 0.5 GB/s against 1.7-1.9 GB/s when the cache is
kept small (docs/performance.md).

With ``log.page.cache.window.bytes`` set, a segment keeps its newest window of bytes (up
to two windows) cached; each window that falls behind is written back and then dropped
(``sync_file_range`` and ``posix_fadvise(DONTNEED)``), so new appends reuse memory just
freed. Consumers at the tail read from the cache as before; one more than a window
behind reads from disk, and those pages are dropped again once the response is sent.
The work runs on the node's worker threads, never on the event loop.

Nothing here changes durability: writing back early is not an fsync (the recovery
point and ``flush.*`` are untouched), and dropping only ever removes clean pages.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import weakref
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class CachedSegment(Protocol):
    """What the window needs of a segment (``storage.segment.LogSegment``)."""

    cold_below: int
    """Where the bytes still meant to be cached begin; all before it was dropped."""

    @property
    def path(self) -> str: ...

    @property
    def fd(self) -> int: ...

    @property
    def size(self) -> int: ...

# sync_file_range(2): wait for writeback already under way, start it, wait for it.
_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_sync_file_range = getattr(_libc, "sync_file_range", None)
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]


def write_back(fd: int, start: int, length: int) -> None:
    """Write a range of a file to its device and wait for it (not a barrier: no flush
    of the device's cache, no metadata), so that its pages are clean and can be dropped."""
    if _sync_file_range is None:  # not Linux: the whole file, with its metadata
        os.fdatasync(fd)
        return
    if _sync_file_range(fd, start, length, _WAIT_BEFORE | _WRITE | _WAIT_AFTER) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def drop(segment: CachedSegment, fd: int, start: int, length: int,
         on_error: Callable[[CachedSegment, OSError], None]) -> None:
    """Write back and drop ``[start, start + length)`` of a segment's file, unless the
    segment was closed meanwhile. (Its descriptor number could by then name another
    file just opened: the cost would be writing back and dropping that file's pages
    early, never losing them.)

    A write-back error goes to ``on_error``: the kernel reports it once per open file,
    so the segment's next fsync would succeed as if nothing had been lost; the caller
    takes the log dir offline, as a failed fsync would."""
    if segment.fd != fd or length <= 0:
        return
    try:
        write_back(fd, start, length)
    except OSError as e:
        if e.errno != errno.EBADF:  # EBADF: closed just now, nothing of ours to report
            on_error(segment, e)
        return
    try:
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass  # the pages just stay cached


def _report(segment: CachedSegment, error: OSError) -> None:
    log.error("Writing back %s failed: %s", segment.path, error)


FOLIO_REACH = 4 << 20
"""More than the largest folio the page cache uses (2 MiB: a PMD on x86-64)."""


class PageCacheWindow:
    """The drop-behind policy of a node's logs (``log.page.cache.window.bytes``)."""

    def __init__(self, window_bytes: int,
                 run: Callable[[Callable[[], None]], object] = lambda job: job(),
                 on_error: Callable[[CachedSegment, OSError], None] = _report) -> None:
        if window_bytes <= 0:
            raise ValueError("the page cache window must be positive")
        self.window = window_bytes
        self.run = run
        """Runs a job off the event loop (the node's executor); inline by default."""
        self.on_error = on_error
        """Told of a failed write-back, from the thread that ran the job."""

    def _drop_later(self, segment: CachedSegment, fd: int, start: int, end: int) -> None:
        # The kernel drops only folios wholly inside the range, and a folio may be up to
        # 2 MiB: one across the start of this range stayed when the range before it was
        # dropped, so every range reaches back by more than that.
        start = max(0, start - FOLIO_REACH)
        self.run(lambda: drop(segment, fd, start, end - start, self.on_error))

    def appended(self, segment: CachedSegment) -> None:
        """After an append: once a whole window lies more than a window behind the
        segment's end, write it back and drop it."""
        cold = segment.size - segment.size % self.window - self.window
        if cold > segment.cold_below:
            start, segment.cold_below = segment.cold_below, cold
            self._drop_later(segment, segment.fd, start, cold)

    def rolled(self, segment: CachedSegment) -> None:
        """A segment stopped being the active one: none of it stays cached."""
        if segment.size > segment.cold_below:
            start, segment.cold_below = segment.cold_below, segment.size
            self._drop_later(segment, segment.fd, start, segment.size)

    def served(self, mapping: Any, segment: CachedSegment, fd: int, start: int, length: int
               ) -> None:
        """A fetch is sending ``mapping`` (bytes ``start..start+length`` of the segment):
        the part older than the window is dropped again once it is unmapped."""
        cold_end = min(start + length, segment.cold_below)
        if cold_end > start:
            weakref.finalize(mapping, self._drop_later, segment, fd, start, cold_end)

    def read(self, segment: CachedSegment, fd: int, start: int, length: int) -> None:
        """A fetch read bytes ``start..start+length`` into memory: drop the old part."""
        cold_end = min(start + length, segment.cold_below)
        if cold_end > start:
            self._drop_later(segment, fd, start, cold_end)
