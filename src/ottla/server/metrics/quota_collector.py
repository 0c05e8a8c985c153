"""Kafka's client quota metrics (the sensors of its ``ClientQuotaManager`` and
subclasses), read when scraped from the node's quota managers: per quota entity a rate
(``byte-rate`` of Produce and Fetch, ``request-time`` of Request, ``mutation-rate`` of
ControllerMutation) and ``throttle-time``, the mean throttle time of its throttled
requests lately (NaN when none).

Kafka's bean is ``kafka.server:type=<quota type>,user=U,client-id=C`` with the tags of
the entity level the quotas measure a client at: both for a user's client id, ``user``
alone for a user's quota, ``client-id`` alone for a client id's (and with no quota of the
type set anywhere, no bean at all). The JMX exporter's quota rules name them
``kafka_server_quota_<attribute>`` with labels ``resource`` (the type), ``user`` and
``clientId`` (``jmx_names.quota_metric``). As in Kafka, every client a manager measures
has them once any quota of its type is set, those without a quota of their own too (their
rate is measured, never bounded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import quote

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.broker.quota.client_quota_manager import QuotaType, Tags
from ottla.broker.quota.quota_managers import ClientQuotaManagers
from ottla.server.metrics.jmx_names import quota_metric

GROUPS: dict[QuotaType, str] = {
    QuotaType.PRODUCE: "Produce", QuotaType.FETCH: "Fetch", QuotaType.REQUEST: "Request",
    QuotaType.CONTROLLER_MUTATION: "ControllerMutation"}
"""Kafka's ``QuotaType`` names: the metrics group, the bean's ``type``."""

RATES: dict[QuotaType, tuple[str, str]] = {
    QuotaType.PRODUCE: ("byte-rate", "Tracking byte-rate per user/client-id"),
    QuotaType.FETCH: ("byte-rate", "Tracking byte-rate per user/client-id"),
    QuotaType.REQUEST: ("request-time", "Tracking request-time per user/client-id"),
    QuotaType.CONTROLLER_MUTATION: ("mutation-rate", "Tracking mutation-rate per user/client-id"),
}
"""The rate metric of each quota type, with Kafka's description."""
THROTTLE_TIME = "throttle-time"


def sanitized_user(user: str) -> str:
    """A user as Kafka's quota metric tags carry it (``Sanitizer.sanitize``: Java's
    URL encoding, with ``*`` and space percent-encoded too): letters, digits and ``._-``
    as they are, every other byte of its UTF-8 as ``%XX``."""
    return quote(user, safe="").replace("~", "%7E")


def quota_labels(resource: str, tags: Tags) -> dict[str, str] | None:
    """The exporter's labels for an entity's bean; None for one with neither tag (a
    client with no client id, whose bean no quota rule matches)."""
    user, client_id = tags
    if not user and not client_id:
        return None
    labels = {"resource": resource}
    if user:
        labels["user"] = sanitized_user(user)
    if client_id:
        labels["clientId"] = client_id
    return labels


class ClientQuotaCollector:
    """``kafka_server_quota_{byte_rate,request_time,mutation_rate,throttle_time}``: each
    manager's sensors as they stand at the scrape. Those of clients idle for an hour are
    forgotten first (Kafka expires them on a timer); nothing else is changed."""

    def __init__(self, quotas: ClientQuotaManagers, now_ms: Callable[[], int]) -> None:
        self.quotas = quotas
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        now = self.now_ms()
        families: dict[str, GaugeMetricFamily] = {}

        def family(attribute: str, doc: str) -> GaugeMetricFamily:
            name = quota_metric(attribute)
            if name not in families:
                families[name] = GaugeMetricFamily(
                    name, f"{doc} (kafka.server:type=<resource>,user=...,client-id=... "
                    f"{attribute})")
            return families[name]

        for manager in self.quotas.managers:
            tracked = manager.tracked(now)
            if not tracked:
                continue
            resource = GROUPS[manager.quota_type]
            attribute, doc = RATES[manager.quota_type]
            rates = family(attribute, doc)
            throttles = family(THROTTLE_TIME, "Tracking average throttle-time per "
                                              "user/client-id")
            for tags, sensor in tracked:
                labels = quota_labels(resource, tags)
                if labels is None:
                    continue
                rates.add_sample(rates.name, labels, manager.rate(sensor, now))
                throttles.add_sample(throttles.name, labels,
                                     sensor.throttle_time.measure(now))
        yield from families.values()
