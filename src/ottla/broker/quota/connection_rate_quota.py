"""Kafka's connection creation rate quotas (KIP-612, the rate part of ``ConnectionQuotas``):
connections accepted per second on the whole node (``max.connection.creation.rate``), on
one listener (``listener.name.L.max.connection.creation.rate``) and from one client
address (the ``connection_creation_rate`` client quota of an ``ip`` entity, or of the
default ip).

Each is Kafka's ``Rate`` over ``quota.window.num`` windows of
``quota.window.size.seconds``. Over the node's or a listener's rate the listener stops
accepting for the throttle time (Kafka blocks its acceptor thread): the connection waits,
and so do those behind it. Over an address's rate the connection is not taken at all: it
is closed, unread, once the throttle time has passed (Kafka's ``DelayedCloseSocket``),
and it is taken back from every rate it was counted in. A throttle is at most one
window. An inter-broker listener is exempt from the node's rate when there are others,
as in Kafka. Sans-I/O: callers pass ``now_ms``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from ottla.broker.quota.client_quota_manager import (
    EXPIRY_CHECK_INTERVAL_MS,
    INACTIVE_SENSOR_EXPIRY_MS,
    MAX_SENSORS,
    throttle_time_ms,
)
from ottla.common.stats.rate import Rate

UNLIMITED = 2**31 - 1
"""Kafka's default for every connection rate (Int.MaxValue): no quota."""


class _Bounded:
    """One measured connection rate and its quota."""

    __slots__ = ("bound", "last_ms", "rate")

    def __init__(self, rate: Rate, bound: float, now_ms: int) -> None:
        self.rate = rate
        self.bound = bound
        self.last_ms = now_ms


class ConnectionRateQuotas:
    def __init__(self, samples: int = 11, window_seconds: int = 1,
                 node_rate: int = UNLIMITED, listener_rates: Mapping[str, int] | None = None
                 ) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000
        self.max_throttle_ms = self.window_ms
        self.node_rate = node_rate
        self.listener_rates = {name: rate for name, rate in (listener_rates or {}).items()
                               if rate < UNLIMITED}
        self._node = self._new(node_rate, 0) if node_rate < UNLIMITED else None
        self._listeners = {name: self._new(rate, 0) for name, rate in self.listener_rates.items()}
        self.ip_rates: dict[str | None, float] = {}
        """``connection_creation_rate`` by address; None is the default ip's."""
        self._ips: dict[str, _Bounded] = {}
        self._next_expiry_ms = 0

    def _new(self, bound: float, now_ms: int) -> _Bounded:
        return _Bounded(Rate(self.samples, self.window_ms), bound, now_ms)

    # --- quotas ----------------------------------------------------------------------

    def set_ip_quotas(self, quotas: Mapping[str | None, float]) -> None:
        """Every address's ``connection_creation_rate`` (at start, after a snapshot)."""
        self.ip_rates = dict(quotas)
        self._rebound()

    def update_ip_quota(self, ip: str | None, rate: float | None) -> None:
        """One address's quota (None: the default ip's) set, or removed with None."""
        if rate is None:
            self.ip_rates.pop(ip, None)
        else:
            self.ip_rates[ip] = rate
        self._rebound()

    def ip_quota(self, ip: str) -> float | None:
        """The quota of connections from ``ip`` (Kafka's ``connectionRateForIp``)."""
        rate = self.ip_rates.get(ip, self.ip_rates.get(None))
        return rate if rate is not None and rate < UNLIMITED else None

    def _rebound(self) -> None:
        for ip, sensor in list(self._ips.items()):
            bound = self.ip_quota(ip)
            if bound is None:
                del self._ips[ip]
            else:
                sensor.bound = bound

    @property
    def accept_limited(self) -> bool:
        """Whether any node or listener rate applies (else accepting is never held)."""
        return self._node is not None or bool(self._listeners)

    # --- recording -------------------------------------------------------------------

    def _throttle(self, sensor: _Bounded, now_ms: int) -> int:
        """Record one connection; the throttle time when that takes the rate over its
        quota (Kafka's ``recordAndGetThrottleTimeMs``, bounded to a window)."""
        sensor.rate.record(1.0, now_ms)
        sensor.last_ms = now_ms
        observed = sensor.rate.measure(now_ms)
        if observed <= sensor.bound:
            return 0
        throttle = throttle_time_ms(observed, sensor.bound, sensor.rate.window_size(now_ms))
        return min(throttle, self.max_throttle_ms)

    def record_accept(self, listener: str, protected: bool, now_ms: int) -> int:
        """A connection accepted on ``listener``: how long the listener must hold it (and
        stop accepting) before taking it, for the node's rate (not on a ``protected``
        inter-broker listener) or the listener's, whichever is longer."""
        throttle = 0
        if self._node is not None and not protected:
            throttle = self._throttle(self._node, now_ms)
        sensor = self._listeners.get(listener)
        if sensor is not None:
            throttle = max(throttle, self._throttle(sensor, now_ms))
        return throttle

    def record_ip(self, listener: str, protected: bool, ip: str, now_ms: int) -> int:
        """A connection from ``ip`` about to be taken: 0 to take it, else the time after
        which it is closed untaken (and it no longer counts in any rate)."""
        bound = self.ip_quota(ip)
        if bound is None:
            return 0
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        sensor = self._ips.get(ip)
        if sensor is None:
            if len(self._ips) >= MAX_SENSORS:
                for stale in list(itertools.islice(self._ips, len(self._ips) // 10 + 1)):
                    del self._ips[stale]
            sensor = self._ips[ip] = self._new(bound, now_ms)
        throttle = self._throttle(sensor, now_ms)
        if throttle > 0:
            sensor.rate.record(-1.0, now_ms)
            if self._node is not None and not protected:
                self._node.rate.record(-1.0, now_ms)
            listener_sensor = self._listeners.get(listener)
            if listener_sensor is not None:
                listener_sensor.rate.record(-1.0, now_ms)
        return throttle

    def _expire(self, now_ms: int) -> None:
        """Forget addresses silent for an hour (Kafka's sensor expiry)."""
        self._next_expiry_ms = now_ms + EXPIRY_CHECK_INTERVAL_MS
        for ip in [ip for ip, s in self._ips.items()
                   if now_ms - s.last_ms > INACTIVE_SENSOR_EXPIRY_MS]:
            del self._ips[ip]
