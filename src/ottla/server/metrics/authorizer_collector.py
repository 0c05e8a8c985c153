"""The authorizer's metrics (``security.authorizer_metrics``), read when scraped: Kafka's
bean ``kafka.server:type=plugins,config=authorizer.class.name,class=StandardAuthorizer,
role=R``, one per role of the node (the same counts: Kafka's roles share the sensors),
named as ``raft-metrics`` are (``kafka_server_plugins_<attribute>``) with the bean's
``config``, ``class`` and ``role`` keys as labels (the example rules match such beans only
by folding the keys into the name, as for ``connection_count``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.security.authorizer import StandardAuthorizer
from ottla.security.authorizer_metrics import (
    ACLS_TOTAL_COUNT,
    ALLOWED_RATE,
    CLASS,
    CONFIG,
    DENIED_RATE,
    DESCRIPTIONS,
    GROUP,
    REQUEST_RATE,
    AuthorizerMetrics,
)
from ottla.server.metrics.jmx_names import group_metric

LABELS = ("config", "class", "role")


class AuthorizerCollector:
    """``kafka_server_plugins_authorization_{request,allowed,denied}_rate_per_minute``
    and ``kafka_server_plugins_acls_total_count``, per role."""

    def __init__(self, authorizer: StandardAuthorizer, metrics: AuthorizerMetrics,
                 roles: Sequence[str], now_ms: Callable[[], int]) -> None:
        self.authorizer = authorizer
        self.metrics = metrics
        self.roles = roles
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        now = self.now_ms()
        families = {
            attribute: GaugeMetricFamily(
                group_metric(GROUP, attribute),
                f"{DESCRIPTIONS[attribute]} (kafka.server:type={GROUP},config={CONFIG},"
                f"class={CLASS},role=... {attribute})", labels=LABELS)
            for attribute in (ACLS_TOTAL_COUNT, ALLOWED_RATE, DENIED_RATE, REQUEST_RATE)}
        rates = self.metrics.rates_per_minute(now)
        for role in self.roles:
            labels = (CONFIG, CLASS, role)
            families[ACLS_TOTAL_COUNT].add_metric(labels, self.authorizer.acl_count)
            for attribute, value in rates.items():
                families[attribute].add_metric(labels, value)
        yield from families.values()
