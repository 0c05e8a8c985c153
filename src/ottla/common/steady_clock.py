"""A clock for timers that must not follow the wall clock's steps, read as wall time.

A node's timeouts (Raft's election and check-quorum timers, a follower's ISR lag) are
durations: measured on the wall clock, a step forward (an NTP step, a machine whose clock
was wrong) fires them all at once, and a step back holds them. CLOCK_MONOTONIC is never
stepped, but its readings mean nothing outside the process, and some of these times are
also reported (DescribeQuorum's last fetch time). This clock is both: the wall clock's
reading when it was made, advanced by the monotonic clock since.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SteadyClock:
    def __init__(self, wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._offset = wall() - monotonic()

    def __call__(self) -> float:
        """Seconds since the epoch, as the wall clock read them at the start, plus the
        monotonic time elapsed since."""
        return self._monotonic() + self._offset

    def ms(self) -> int:
        return int(self() * 1000)
