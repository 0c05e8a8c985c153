"""The aborted-transaction index of a segment (``.txnindex``, Kafka's TransactionIndex).

Each entry is one aborted transaction whose ABORT marker is in this segment: version
int16 (0), producer id int64, first offset int64, last offset (the marker's) int64, and
the last stable offset when it was aborted int64, 34 bytes, in the order the markers were
written. A ``read_committed`` fetch collects the entries that overlap what it returns
(``AbortedTransactions`` of the response), so the consumer can drop those records.

The file is created on the first abort (most segments never have one). Like the other
indexes it is not fsynced on its own: a segment recovered after an unclean shutdown
rebuilds it from the markers in its batches.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

_ENTRY = struct.Struct(">hqqqq")
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
                if version != VERSION:
                    raise ValueError(f"unexpected aborted transaction version {version} "
                                     f"in {path}")
                self.entries.append(AbortedTxn(pid, first, last, lso))
            if len(data) % _ENTRY.size:  # a torn last entry
                os.truncate(path, len(self.entries) * _ENTRY.size)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and self.entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"the last offset of aborted transactions must increase: "
                             f"{txn.last_offset} after {self.entries[-1].last_offset}")
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                                txn.last_stable_offset))
        self.entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's ``collectAbortedTxns``: the aborted transactions overlapping
        [fetch_offset, upper_bound), and whether no later segment can hold more (an
        entry's last stable offset reached the bound)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries) and os.path.exists(self.path):
            os.truncate(self.path, len(keep) * _ENTRY.size)
        self.entries = keep

    def reset(self) -> None:
        self.truncate_to(-1)

    def flush(self) -> None:
        if os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
