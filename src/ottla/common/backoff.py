"""Retry delays that grow geometrically up to a ceiling (Kafka's
``org.apache.kafka.common.utils.ExponentialBackoff``).

Sans-I/O: it only computes the delay of an attempt; the caller sleeps or schedules. One
helper, so every retry loop backs off the same way and none hand-rolls the doubling.
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    """``initial_ms * multiplier ** attempts``, at most ``max_ms``, optionally spread by
    a random factor in [1 - jitter, 1 + jitter) (still at most ``max_ms``), so that
    clients failing together do not retry together."""

    __slots__ = ("_exp_max", "_rng", "initial_ms", "jitter", "max_ms", "multiplier")

    def __init__(self, initial_ms: float, max_ms: float, multiplier: float = 2,
                 jitter: float = 0.0, rng: random.Random | None = None) -> None:
        if multiplier <= 1:
            raise ValueError(f"multiplier must be above 1, not {multiplier}")
        if not 0 <= jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), not {jitter}")
        self.initial_ms = min(initial_ms, max_ms)
        self.max_ms = max_ms
        self.multiplier = multiplier
        self.jitter = jitter
        self._rng = rng
        self._exp_max = math.log(max_ms / self.initial_ms) / math.log(multiplier) \
            if 0 < self.initial_ms < max_ms else 0.0
        """The attempt from which the ceiling is reached (fractional, as Kafka's); 0 when
        the delay never grows (no initial delay, or one at the ceiling already)."""

    def backoff(self, attempts: int) -> float:
        """The delay, in ms, before the retry that follows ``attempts`` failed retries (0
        for the first retry: ``initial_ms``)."""
        if self._exp_max == 0:
            return self.initial_ms
        # At the ceiling, the ceiling itself: no float error, no overflow for a huge count.
        term = self.max_ms if attempts >= self._exp_max else \
            self.initial_ms * self.multiplier ** attempts
        if self.jitter > 0:
            term *= (self._rng or random).uniform(1 - self.jitter, 1 + self.jitter)
        return min(term, self.max_ms)
