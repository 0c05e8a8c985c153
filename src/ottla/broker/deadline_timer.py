"""One event-loop timer for a sans-I/O core's deadlines.

Cores (the purgatories, the coordinator runtime) keep their own deadlines and only say
when the earliest one moved earlier; this driver keeps a single ``call_later`` armed at
the earliest, calls the core's ``poll(now_ms)`` when it fires, and re-arms at the deadline
``poll`` returns next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    """The clock a core's timeouts are best kept on: a step of the wall clock (an NTP
    step, a skewed machine) neither fires them all at once nor holds them."""
    return int(time.monotonic() * 1000)


class DeadlineTimer:
    def __init__(self, name: str, now_ms: Callable[[], int],
                 poll: Callable[[int], int | None]) -> None:
        self.name = name
        self._now_ms = now_ms
        self._poll = poll
        self._handle: asyncio.TimerHandle | None = None
        self._deadline: int | None = None

    def deadline_changed(self, deadline: int) -> None:
        """The core's earliest deadline may now be ``deadline``."""
        if self._handle is not None and self._deadline is not None and \
                self._deadline <= deadline:
            return
        self._arm(deadline)

    def _arm(self, deadline: int) -> None:
        if self._handle is not None:
            self._handle.cancel()
        delay = max(0.0, (deadline - self._now_ms()) / 1000)
        self._deadline = deadline
        self._handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._deadline = None
        following = None
        try:
            following = self._poll(self._now_ms())
        except Exception:
            log.exception("A %s timer failed", self.name)
        if following is not None and (self._deadline is None or following < self._deadline):
            self._arm(following)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._deadline = None
