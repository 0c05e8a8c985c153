"""The StandardAuthorizer's metrics (Kafka's ``StandardAuthorizer.AuthorizerMetrics``,
registered through KIP-877's ``PluginMetrics``), sans-I/O: callers pass ``now_ms``.

Kafka records every action its authorizer decides, allowed or denied, and counts the
authorizer's ACLs; Kafka's bean is ``kafka.server:type=plugins,config=authorizer.class.name,
class=StandardAuthorizer,role=R`` with the attributes ``authorization-request-rate-per-minute``,
``authorization-allowed-rate-per-minute``, ``authorization-denied-rate-per-minute`` (each a
``Rate`` per minute of a ``WindowedCount``) and ``acls-total-count``. A node with both roles
has one authorizer per role in Kafka (``role=broker`` and ``role=controller``), each counting
the requests of its own listeners: one ``AuthorizerMetrics`` per role here, over the node's
one authorizer. An action Kafka cannot decide yet (its ``AuthorizerNotReadyException``
before the initial ACL load) is not counted.
"""

from __future__ import annotations

from ottla.common.stats.rate import Rate

REQUEST_RATE = "authorization-request-rate-per-minute"
ALLOWED_RATE = "authorization-allowed-rate-per-minute"
DENIED_RATE = "authorization-denied-rate-per-minute"
ACLS_TOTAL_COUNT = "acls-total-count"

DESCRIPTIONS: dict[str, str] = {
    REQUEST_RATE: "The number of authorization request per minute",
    ALLOWED_RATE: "The number of authorization allowed per minute",
    DENIED_RATE: "The number of authorization denied per minute",
    ACLS_TOTAL_COUNT: "The number of acls defined",
}
"""Kafka's descriptions, word for word."""

GROUP = "plugins"
"""``PluginMetricsImpl``'s metrics group."""
CONFIG = "authorizer.class.name"
CLASS = "StandardAuthorizer"
"""The plugin's tags beside ``role``: the config that names it, its simple class name."""


class AuthorizerMetrics:
    """The authorization rates of a node's authorizer: ``samples`` windows of
    ``window_ms`` (Kafka's ``metrics.num.samples`` and ``metrics.sample.window.ms``)."""

    __slots__ = ("allowed", "denied", "requests")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.allowed = Rate(samples, window_ms)
        self.denied = Rate(samples, window_ms)
        self.requests = Rate(samples, window_ms)

    def record(self, allowed: bool, now_ms: int) -> None:
        """One action decided (``recordAuthorizerMetrics``)."""
        (self.allowed if allowed else self.denied).record(1.0, now_ms)
        self.requests.record(1.0, now_ms)

    def rates_per_minute(self, now_ms: int) -> dict[str, float]:
        """Each rate as Kafka's ``Rate(TimeUnit.MINUTES, ...)`` measures it."""
        return {REQUEST_RATE: self.requests.measure(now_ms) * 60.0,
                ALLOWED_RATE: self.allowed.measure(now_ms) * 60.0,
                DENIED_RATE: self.denied.measure(now_ms) * 60.0}
