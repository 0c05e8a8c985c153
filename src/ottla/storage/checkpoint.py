"""Kafka's checkpoint files, written atomically (temp file, fsync, rename, fsync dir).

``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` in each log dir, and ``leader-epoch-checkpoint`` in each
partition dir, share one text format::

    0            <- version
    2            <- number of entries
    topic 0 42   <- one entry per line, fields separated by spaces
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ottla.common.files import write_atomically

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def write_checkpoint(path: str, entries: Iterable[Sequence[object]], version: int = 0,
                     sync: bool = True) -> None:
    rows = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{version}\n{len(rows)}\n" + "".join(row + "\n" for row in rows)
    write_atomically(path, text.encode(), sync)


def read_checkpoint(path: str) -> list[list[str]]:
    """The entries of a checkpoint file ([] if it is missing); raises ValueError if corrupt."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2:
        raise ValueError(f"{path}: truncated checkpoint")
    count = int(lines[1])
    entries = [line.split() for line in lines[2 : 2 + count]]
    if len(entries) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """A topic-partition -> offset checkpoint; a corrupt file reads as empty."""
    try:
        return {(t, int(p)): int(o) for t, p, o in read_checkpoint(path)}
    except ValueError:
        return {}


def write_offsets(path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_checkpoint(path, [(t, p, o) for (t, p), o in sorted(offsets.items())])
