"""The throttled channels of one quota type (Kafka's ``ClientQuotaManager.delayQueue`` of
``ThrottledChannel``): each throttle a response of that quota type starts is in it until
its delay is over, what the type's ``queue-size`` metric counts. The network layer mutes
the connections; this only counts. Sans-I/O: callers pass ``now_ms``."""

from __future__ import annotations

import heapq


class DelayQueue:
    __slots__ = ("_until",)

    def __init__(self) -> None:
        self._until: list[int] = []

    def add(self, throttle_ms: int, now_ms: int) -> None:
        """A connection throttled for ``throttle_ms`` from ``now_ms`` (Kafka adds one
        ``ThrottledChannel`` per throttled response, a connection muted already too)."""
        if throttle_ms > 0:
            self._reap(now_ms)  # what is over goes whether or not the size is read
            heapq.heappush(self._until, now_ms + throttle_ms)

    def size(self, now_ms: int) -> int:
        """The throttles not over at ``now_ms`` (Kafka's reaper takes each out as its
        delay ends)."""
        self._reap(now_ms)
        return len(self._until)

    def _reap(self, now_ms: int) -> None:
        until = self._until
        while until and until[0] <= now_ms:
            heapq.heappop(until)
