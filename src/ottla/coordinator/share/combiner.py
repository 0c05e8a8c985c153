"""Kafka's PersisterStateBatchCombiner: folds new state batches into the old ones so the
stored list stays non-overlapping and run-length encoded (without it, repeated partial
acknowledgements would fragment it without bound).

Where batches overlap, the one with the higher delivery count wins, and on equal counts
the higher delivery state (so an acknowledgement beats the delivery it acknowledges, and a
redelivery beats the release before it); adjacent runs with the same state and count are
joined; everything below the start offset is dropped. The algorithm is Kafka's, step for
step, so a state rebuilt here has exactly the batches Kafka's coordinator would store.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import replace

from ottla.coordinator.share.state import UNINITIALIZED_START_OFFSET, PersisterStateBatch


def combine_state_batches(so_far: Iterable[PersisterStateBatch],
                          new: Iterable[PersisterStateBatch],
                          start_offset: int) -> list[PersisterStateBatch]:
    """The batches of ``so_far`` overlaid with ``new``, pruned below ``start_offset``
    (-1: nothing pruned), in offset order."""
    combined = _prune([*so_far, *new], start_offset)
    if len(combined) < 2:
        return combined
    return _Merge(combined).run()


def _prune(batches: list[PersisterStateBatch], start_offset: int
           ) -> list[PersisterStateBatch]:
    if start_offset == UNINITIALIZED_START_OFFSET:
        return batches
    return [b if b.first_offset >= start_offset else replace(b, first_offset=start_offset)
            for b in batches if b.last_offset >= start_offset]


def _order(b: PersisterStateBatch) -> tuple[int, int, int, int]:
    """PersisterStateBatch.compareTo: first offset, last offset, count, state."""
    return b.first_offset, b.last_offset, b.delivery_count, b.delivery_state


def _priority(b1: PersisterStateBatch, b2: PersisterStateBatch) -> int:
    """compareBatchDeliveryInfo: >0 when ``b1`` wins over ``b2``, 0 when alike."""
    if b1.delivery_count != b2.delivery_count:
        return b1.delivery_count - b2.delivery_count
    return b1.delivery_state - b2.delivery_state


def _batch(first: int, last: int, like: PersisterStateBatch) -> PersisterStateBatch:
    return PersisterStateBatch(first, last, like.delivery_state, like.delivery_count)


class _Merge:
    """One run of the merge: ``pending`` is Kafka's TreeSet (sorted by ``_order``, no
    duplicates), ``done`` its final list."""

    def __init__(self, batches: list[PersisterStateBatch]) -> None:
        self.pending = sorted(set(batches), key=_order)
        self.done: list[PersisterStateBatch] = []

    def run(self) -> list[PersisterStateBatch]:
        while (pair := self._next_pair()) is not None:
            prev, candidate = pair
            self.pending.remove(prev)
            self.pending.remove(candidate)
            if _priority(candidate, prev) == 0:
                self._add(_batch(prev.first_offset,
                                 max(candidate.last_offset, prev.last_offset), prev))
            else:
                self._overlap(prev, candidate)
        self.done.extend(self.pending)
        return self.done

    def _add(self, batch: PersisterStateBatch) -> None:
        if batch not in self.pending:
            bisect.insort(self.pending, batch, key=_order)

    def _next_pair(self) -> tuple[PersisterStateBatch, PersisterStateBatch] | None:
        """getMergeCandidatePair: the first two batches that overlap, or touch with the
        same state; the batches before them are final."""
        if not self.pending:
            return None
        settled = 0
        for i in range(1, len(self.pending)):
            prev, candidate = self.pending[i - 1], self.pending[i]
            if candidate.first_offset <= prev.last_offset or (
                    prev.last_offset + 1 == candidate.first_offset
                    and _priority(prev, candidate) == 0):
                self._settle(settled)
                return prev, candidate
            settled = i
        self._settle(settled)
        return None

    def _settle(self, count: int) -> None:
        self.done.extend(self.pending[:count])
        del self.pending[:count]

    def _overlap(self, prev: PersisterStateBatch, candidate: PersisterStateBatch) -> None:
        """Overlapping batches of different states (``prev`` sorts first)."""
        wins = _priority(candidate, prev) >= 0
        if candidate.first_offset == prev.first_offset:
            if candidate.last_offset == prev.last_offset or wins:
                self._add(candidate)  # it covers prev and wins (equal ranges sort by it)
            else:
                self._add(prev)
                self._add(_batch(prev.last_offset + 1, candidate.last_offset, candidate))
        elif candidate.last_offset < prev.last_offset:  # prev swallows candidate
            if not wins:
                self._add(prev)
            else:
                self._add(_batch(prev.first_offset, candidate.first_offset - 1, prev))
                self._add(candidate)
                self._add(_batch(candidate.last_offset + 1, prev.last_offset, prev))
        elif candidate.last_offset == prev.last_offset:
            if not wins:
                self._add(prev)
            else:
                self._add(_batch(prev.first_offset, candidate.first_offset - 1, prev))
                self._add(candidate)
        elif not wins:  # candidate reaches past prev
            self._add(prev)
            self._add(_batch(prev.last_offset + 1, candidate.last_offset, candidate))
        else:
            self._add(_batch(prev.first_offset, candidate.first_offset - 1, prev))
            self._add(candidate)
