"""Delayed operations and their purgatory (Kafka's ``DelayedOperationPurgatory``).

A request that cannot be answered yet (an ``acks=all`` produce waiting for the in-sync
replicas, a fetch waiting for ``min_bytes``) parks here, watched under the keys whose
progress could complete it (its partitions). Whoever moves a partition (an append, a
follower's fetch, a new leader) calls ``check_and_complete`` with that key; the driver
calls ``expire`` when ``next_deadline`` has passed. The purgatory never reads a clock or
touches the event loop: it is given ``now_ms`` and tells its driver, through
``on_deadline_change``, when the earliest deadline moved earlier.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class DelayedOperation(ABC):
    """One parked request. Subclasses say when it is done (``try_complete``) and what
    answering means (``on_complete``); it completes exactly once, whichever of a key's
    progress, its deadline or a shutdown comes first."""

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self.completed = False

    @abstractmethod
    def try_complete(self, now_ms: int) -> bool:
        """Check whether the operation can finish now; if so, call ``force_complete``
        and return what it returned."""

    @abstractmethod
    def on_complete(self) -> None:
        """Answer the request, with whatever state the operation has reached."""

    def on_expiration(self) -> None:  # noqa: B027 - most operations need no step here
        """The deadline passed first (before ``on_complete``): mark what is still waiting."""

    def force_complete(self) -> bool:
        """Complete now; False if something else completed it first."""
        if self.completed:
            return False
        self.completed = True
        self.on_complete()
        return True


class DelayedOperationPurgatory(Generic[K]):
    def __init__(self, name: str, timer_ms: Callable[[], int] | None = None) -> None:
        self.name = name
        self.timer_ms = timer_ms
        """The clock deadlines are kept on, in ms: the driver gives a monotonic one, so
        that a step of the wall clock back does not hold a parked request for as long
        (Kafka's purgatory times on a monotonic timer). None: the ``now_ms`` given.
        An operation's own ``deadline_ms`` stays on the wall clock it was made with."""
        self._watchers: dict[K, list[DelayedOperation]] = {}
        self._keys: dict[DelayedOperation, tuple[K, ...]] = {}
        self._deadlines: list[tuple[int, int, DelayedOperation]] = []
        self._seq = itertools.count()
        self.on_deadline_change: Callable[[int], None] = lambda deadline: None
        """The driver's hook: the earliest deadline may now be ``deadline``."""

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[K],
                                now_ms: int) -> bool:
        """Complete ``operation`` at once if it can; otherwise park it under ``keys`` until
        one of them moves or its deadline passes. True if it completed here."""
        if operation.try_complete(now_ms):
            return True
        watched = self._keys[operation] = tuple(dict.fromkeys(keys))
        for key in watched:
            self._watchers.setdefault(key, []).append(operation)
        due = self._timer_now(now_ms) + max(0, operation.deadline_ms - now_ms)
        heapq.heappush(self._deadlines, (due, next(self._seq), operation))
        if self._deadlines[0][2] is operation:
            self.on_deadline_change(due)
        return False

    def _timer_now(self, now_ms: int) -> int:
        return self.timer_ms() if self.timer_ms is not None else now_ms

    def check_and_complete(self, key: K, now_ms: int) -> int:
        """``key`` moved: try every operation watching it; how many completed."""
        operations = self._watchers.get(key)
        if not operations:
            return 0
        completed = 0
        for operation in list(operations):
            if operation.completed or operation.try_complete(now_ms):
                self._unwatch(operation)
                completed += 1
        return completed

    def expire(self, now_ms: int) -> int:
        """Complete every operation whose deadline has passed (on ``timer_ms`` if given,
        else at ``now_ms``)."""
        expired = 0
        due = self._timer_now(now_ms)
        while self._deadlines and self._deadlines[0][0] <= due:
            _, _, operation = heapq.heappop(self._deadlines)
            if operation.completed:
                continue
            self._unwatch(operation)
            operation.on_expiration()
            if operation.force_complete():
                expired += 1
        return expired

    def next_deadline(self) -> int | None:
        """The earliest deadline, on ``timer_ms`` if given."""
        while self._deadlines and self._deadlines[0][2].completed:
            heapq.heappop(self._deadlines)
        return self._deadlines[0][0] if self._deadlines else None

    def complete_all(self) -> int:
        """Complete every parked operation as it stands (a broker shutting down)."""
        operations = [op for _, _, op in self._deadlines]
        self._deadlines.clear()
        self._watchers.clear()
        self._keys.clear()
        return sum(op.force_complete() for op in operations)

    def watched(self, key: K | None = None) -> int:
        """Operations parked under ``key`` (or in all), not yet completed."""
        if key is not None:
            return sum(not op.completed for op in self._watchers.get(key, ()))
        return sum(not op.completed for _, _, op in self._deadlines)

    def size(self) -> int:
        """Kafka's PurgatorySize: the parked operations counted once per key each is
        watched under (an ``acks=all`` produce to three partitions counts three)."""
        return sum(not op.completed for ops in self._watchers.values() for op in ops)

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in self._keys.pop(operation, ()):
            operations = self._watchers.get(key)
            if operations is None:
                continue
            try:
                operations.remove(operation)
            except ValueError:
                pass
            if not operations:
                del self._watchers[key]
