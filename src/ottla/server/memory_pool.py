"""The node's budget for request bytes read but not yet handled (Kafka's MemoryPool,
sized by ``queued.max.request.bytes``).

A connection reserves a frame's whole size when the frame's size prefix arrives, before
it buffers any of it, and gives it back once the request has been handled. When the
budget is spent, the connection stops reading and waits in line: N clients each
announcing a 100 MiB frame wait for memory instead of taking N x 100 MiB. Reserving the
whole frame at once (not as bytes arrive) is what keeps the line moving: a connection
that holds a reservation can always finish its frame, so no two connections can each hold
half of what the other needs.
"""

from __future__ import annotations

import collections
from collections.abc import Callable


class MemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """``capacity``: bytes; None for no limit (Kafka's -1)."""
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[tuple[int, Callable[[], None]]] = \
            collections.deque()

    @property
    def available(self) -> int | None:
        return None if self.capacity is None else self.capacity - self.used

    def reserve(self, size: int, on_granted: Callable[[], None]) -> bool:
        """Reserve ``size`` bytes now (True), or queue the request (False): ``on_granted``
        is called once the bytes are reserved for the caller. Requests are granted in
        order, so a large frame is not overtaken forever by small ones."""
        if self.capacity is None or (not self._waiters and self.used + size <= self.capacity):
            self.used += size
            return True
        self._waiters.append((size, on_granted))
        return False

    def cancel(self, on_granted: Callable[[], None]) -> None:
        """Withdraw a queued request (its connection closed)."""
        self._waiters = collections.deque(w for w in self._waiters if w[1] is not on_granted)
        self._grant()

    def release(self, size: int) -> None:
        self.used -= size
        assert self.used >= 0, "released more than was reserved"
        self._grant()

    def _grant(self) -> None:
        while self._waiters and self.capacity is not None and \
                self.used + self._waiters[0][0] <= self.capacity:
            size, on_granted = self._waiters.popleft()
            self.used += size
            on_granted()
