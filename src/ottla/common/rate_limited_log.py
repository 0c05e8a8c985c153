"""Log a recurring failure once per interval, not once per request.

A client that sends the same bad request in a loop would otherwise fill the log with one
traceback per request; here the first occurrence of each kind is logged in full and the
repeats within the interval are counted and reported with the next one logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, max_kinds: int = 1024) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self.max_kinds = max_kinds
        self._last: dict[Hashable, tuple[float, int]] = {}
        """Per kind: when it was last logged, and how often it happened since."""

    def log(self, level: int, kind: Hashable, msg: str, *args: object,
            exc_info: bool = False) -> bool:
        """Log ``msg`` unless ``kind`` was logged within the interval; True if logged."""
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last[0] < self.interval_s:
            self._last[kind] = (last[0], last[1] + 1)
            return False
        if last is None and len(self._last) >= self.max_kinds:
            self._last.clear()
        suppressed = last[1] if last is not None else 0
        self._last[kind] = (now, 0)
        if suppressed:
            msg += f" ({suppressed} more like it in the last {self.interval_s:.0f} s not logged)"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True
