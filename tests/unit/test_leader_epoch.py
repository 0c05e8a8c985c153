"""``epoch_end_offset``: where a leader epoch ends in a log, as Kafka's
``LeaderEpochFileCache.endOffsetFor`` answers it (OffsetForLeaderEpoch, and the leader's
check of a fetcher's last fetched epoch)."""

from __future__ import annotations

import pytest

from ottla.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    LeaderEpochCache,
    earliest_epoch,
    epoch_end_offset,
)

# Epoch 1 from 0, epoch 3 from 10, epoch 6 from 25; the log ends at 40.
ENTRIES = [(1, 0), (3, 10), (6, 25)]
LOG_END = 40
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def test_the_latest_epoch_ends_at_the_log_end() -> None:
    assert epoch_end_offset(ENTRIES, 6, LOG_END) == (6, 40)
    assert epoch_end_offset([(0, 0)], 0, 0) == (0, 0)


def test_an_epoch_above_every_known_one_is_undefined() -> None:
    assert epoch_end_offset(ENTRIES, 7, LOG_END) == UNDEFINED
    assert epoch_end_offset(ENTRIES, 1000, LOG_END) == UNDEFINED
    assert epoch_end_offset([], 0, 0) == UNDEFINED  # no epochs: every one is above


def test_an_epoch_below_every_known_one_ends_where_the_first_starts() -> None:
    # Its data is gone (deleted or never here); the fetcher replicates from there.
    assert epoch_end_offset(ENTRIES, 0, LOG_END) == (0, 0)
    assert epoch_end_offset([(4, 12), (6, 25)], 2, LOG_END) == (2, 12)


@pytest.mark.parametrize(("epoch", "expected"), [
    (1, (1, 10)),  # a known epoch ends where the next starts
    (2, (1, 10)),  # an unknown one between: the largest known below it
    (3, (3, 25)),
    (4, (3, 25)),
    (5, (3, 25)),
])
def test_an_epoch_between_known_ones_is_the_floor_ending_where_the_next_starts(
        epoch: int, expected: tuple[int, int]) -> None:
    assert epoch_end_offset(ENTRIES, epoch, LOG_END) == expected


@pytest.mark.parametrize("epoch", [-1, -2])
def test_a_negative_epoch_is_undefined(epoch: int) -> None:
    assert epoch_end_offset(ENTRIES, epoch, LOG_END) == UNDEFINED


def test_the_cache_answers_with_its_entries(tmp_path) -> None:
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(1, 0)
    cache.assign(3, 10)
    cache.assign(2, 12)  # an older epoch after a newer one is ignored
    assert cache.entries == [(1, 0), (3, 10)]
    assert cache.end_offset_for_leader_epoch(1, 30) == (1, 10)
    assert cache.end_offset_for_leader_epoch(3, 30) == (3, 30)
    assert cache.end_offset_for_leader_epoch(0, 30) == (0, 0)
    assert cache.end_offset_for_leader_epoch(4, 30) == UNDEFINED


def test_earliest_is_the_first_epoch_when_it_starts_at_or_below_the_log_start() -> None:
    """ListOffsets EARLIEST (Kafka's ``UnifiedLog.fetchOffsetByTimestamp``)."""
    assert earliest_epoch(ENTRIES, 0) == 1
    assert earliest_epoch([(0, 0)], 0) == 0  # a new leader's epoch on an empty log
    assert earliest_epoch([(3, 12), (6, 25)], 12) == 3  # after DeleteRecords to 12


def test_earliest_is_unknown_without_an_epoch_at_the_log_start() -> None:
    assert earliest_epoch([], 0) == UNDEFINED_EPOCH
    # The first batches came before any epoch was recorded.
    assert earliest_epoch([(3, 10)], 4) == UNDEFINED_EPOCH
