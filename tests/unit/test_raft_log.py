"""The Raft log's epoch lookups, with and without a snapshot prefix."""

from __future__ import annotations

import pytest

from ottla.raft.memory_log import MemoryLog
from ottla.raft.messages import Entry, Snapshot


def log_of(epochs: list[int]) -> MemoryLog:
    log = MemoryLog()
    log.append([Entry(e, i) for i, e in enumerate(epochs)])
    return log


def test_end_offset_for_epoch_is_where_the_next_epoch_starts():
    log = log_of([1, 1, 2, 2, 2, 5])
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(3) == (2, 5)  # epochs 3 and 4 never had entries
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert log.end_offset_for_epoch(9) == (5, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_a_snapshot_moves_the_log_start_and_answers_for_its_epoch():
    log = log_of([1, 1, 2, 2, 2, 5])
    log.take_snapshot(Snapshot(4, 2, "state"))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (4, 6, 5)
    assert log.epoch_at(3) == 2 and log.epoch_at(4) == 2
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(1) == (0, 0)  # inside the snapshot: unknown
    assert log.read(4, 10) == (Entry(2, 4), Entry(5, 5))
    with pytest.raises(IndexError):
        log.truncate_to(3)
    log.install_snapshot(Snapshot(10, 6, "newer"))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (10, 10, 6)
    assert log.end_offset_for_epoch(6) == (6, 10)


def test_entries_are_batches_spanning_several_offsets():
    log = MemoryLog()
    log.append([Entry(1, "a", 3), Entry(1, "b", 1), Entry(2, "c", 2)])
    assert (log.end_offset, log.last_epoch) == (6, 2)
    assert [log.epoch_at(o) for o in range(6)] == [1, 1, 1, 1, 2, 2]
    assert log.end_offset_for_epoch(1) == (1, 4)
    assert log.read(3, 5) == (Entry(1, "b", 1), Entry(2, "c", 2))
    with pytest.raises(IndexError):
        log.read(1, 5)  # not where an entry starts
    log.truncate_to(4)
    assert log.end_offset == 4
    log.take_snapshot(Snapshot(3, 1, "state"))
    assert (log.start_offset, log.read(3, 5)) == (3, (Entry(1, "b", 1),))


def test_truncating_inside_a_batch_drops_the_whole_batch_as_kafkas_log_does():
    log = MemoryLog()
    log.append([Entry(1, "a", 3), Entry(2, "b", 4)])
    log.truncate_to(5)  # inside [3, 7)
    assert (log.end_offset, log.last_epoch) == (3, 1)
    log.truncate_to(1)  # inside [0, 3)
    assert (log.end_offset, log.entries) == (0, [])
