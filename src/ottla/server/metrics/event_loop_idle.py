"""The event loop's idle share: what Kafka's
``kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent`` tells of its
network threads (the average of their selectors' ``io-wait-ratio``, a fraction 0..1 of
the last 30 seconds or so spent waiting in ``select``), for the one loop that runs a
node's network and handlers alike.

How it is measured: the CPU time of the loop's thread (``time.thread_time``) against
the wall clock, sampled once a second by a timer on the loop (one callback a second,
nothing on the request path); idle is 1 - CPU / wall over the last ``WINDOW`` samples
(and, read on the loop's thread, up to now). uvloop waits in libuv's ``epoll_wait``
where Python cannot time it, which is why the thread's CPU time stands in for "not
waiting". The difference from Kafka's: a loop blocked in a system call other than the
poll (a synchronous disk read or ``fsync`` on the loop) counts as idle here, busy in
Kafka's; and the other threads (the validation pool, the executor) are not counted, as
Kafka's I/O threads are not part of this gauge either.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable

INTERVAL_S = 1.0
WINDOW = 30
"""Samples kept: the ratio covers the last 30 seconds (Kafka's metrics default to two
30-second windows)."""


class EventLoopIdle:
    """Samples the loop's thread's CPU time; ``ratio`` is the idle share."""

    def __init__(self, wall: Callable[[], float] = time.perf_counter,
                 cpu: Callable[[], float] = time.thread_time) -> None:
        self.wall = wall
        self.cpu = cpu
        self.samples: deque[tuple[float, float]] = deque(maxlen=WINDOW + 1)
        """(wall, loop thread's CPU) seconds, the oldest first."""
        self.first: tuple[float, float] | None = None
        """The first sample: ``mean_ratio`` is since then, as a meter's mean rate."""
        self._handle: asyncio.TimerHandle | None = None
        self._thread: int | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Sample on ``loop`` from now (called on its thread)."""
        self._thread = threading.get_ident()
        self.sample()
        self._handle = loop.call_later(INTERVAL_S, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sample()
        self._handle = loop.call_later(INTERVAL_S, self._tick, loop)

    def sample(self) -> None:
        """Take a reading (on the loop's thread: ``thread_time`` is the caller's)."""
        self.samples.append((self.wall(), self.cpu()))
        if self.first is None:
            self.first = self.samples[-1]

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def ratio(self) -> float:
        """The idle share (0..1) since the oldest sample kept; 1.0 before anything was
        measured."""
        return self._since(self.samples[0] if self.samples else None)

    def mean_ratio(self) -> float:
        """The idle share (0..1) since the first sample (the loop's start), as Kafka's
        ``RequestHandlerAvgIdlePercent`` meter's ``MeanRate`` is since the broker's."""
        return self._since(self.first)

    def _since(self, start: tuple[float, float] | None) -> float:
        if start is None:
            return 1.0
        wall0, cpu0 = start
        if threading.get_ident() == self._thread:
            wall1, cpu1 = self.wall(), self.cpu()
        else:
            wall1, cpu1 = self.samples[-1]
        elapsed = wall1 - wall0
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (cpu1 - cpu0) / elapsed))
