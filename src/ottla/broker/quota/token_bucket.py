"""Kafka's ``TokenBucket`` (``org.apache.kafka.common.metrics.stats``): what the controller
mutation quota (KIP-599) measures instead of the windowed ``Rate`` of the byte quotas.

A client may spend a burst of ``samples * window * quota`` at once, then earns ``quota``
back per second; below zero it is over its quota. The quota is passed at each call, as
Kafka reads it from the metric's config, so a changed quota applies at once. Sans-I/O:
callers pass ``now_ms``.
"""

from __future__ import annotations


class TokenBucket:
    __slots__ = ("last_update_ms", "samples", "tokens", "window_seconds")

    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.samples = samples
        self.window_seconds = window_seconds
        self.tokens = 0.0
        self.last_update_ms = 0
        """From 0, as Kafka's: the first refill fills the bucket to its burst."""

    def _refill(self, quota: float, now_ms: int) -> None:
        burst = self.samples * self.window_seconds * quota
        elapsed_s = (now_ms - self.last_update_ms) / 1000.0
        self.tokens = min(burst, self.tokens + quota * elapsed_s)
        self.last_update_ms = now_ms

    def measure(self, quota: float, now_ms: int) -> float:
        """The tokens left (negative: how far over its quota the client is)."""
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, value: float, quota: float, now_ms: int) -> None:
        self._refill(quota, now_ms)
        self.tokens = min(self.samples * self.window_seconds * quota, self.tokens - value)


def throttle_time_ms(tokens: float, quota: float) -> int:
    """Kafka's ``ControllerMutationQuotaManager.throttleTimeMs``: how long until a bucket
    ``tokens`` below zero is back at zero, rounded as Java's ``Math.round``."""
    if tokens >= 0:
        return 0
    return int(-tokens / quota * 1000 + 0.5)
