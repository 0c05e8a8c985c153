"""Kafka's client quota metrics (the sensors of its ``ClientQuotaManager`` and
subclasses), read when scraped from the node's quota managers: per quota entity a rate
(``byte-rate`` of Produce and Fetch, ``request-time`` of Request, ``mutation-rate`` of
ControllerMutation) and ``throttle-time``, the mean throttle time of its throttled
requests lately (NaN when none); and ControllerMutation's ``tokens``, what is left in
the entity's token bucket (KIP-599; Java's ``Long.MAX_VALUE`` as a double when no quota
bounds it).

Each quota type also has metrics of its own, without entity (the bean
``kafka.server:type=<quota type>``, which the exporter's generic rule names
``kafka_server_<type>_<attribute>``): ``queue-size``, the throttled connections whose
delay is not over, and Request's ``exempt-request-time``, the time of the requests exempt
from the request quota (between nodes, a follower's fetch) while one is set, as a
percentage of a thread. Kafka registers those as each manager is made: a node serves them
always.

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

import re
from collections.abc import Callable, Iterator
from urllib.parse import quote

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.broker.quota.client_quota_manager import (
    ClientQuotaManager,
    MetricTags,
    QuotaType,
    SensorKey,
)
from ottla.broker.quota.controller_mutation_quota import ControllerMutationQuotaManager
from ottla.broker.quota.quota_managers import KAFKA_NAMES, ClientQuotaManagers
from ottla.server.metrics.jmx_names import group_metric, quota_metric

GROUPS = KAFKA_NAMES
"""Kafka's ``QuotaType`` names: the metrics group, the bean's ``type``."""
UNBOUNDED_TOKENS = float(2**63 - 1)
"""Kafka's TokenBucket with no quota: ``Long.MAX_VALUE``, as a double."""

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


def quota_labels(resource: str, tags: SensorKey) -> dict[str, str] | None:
    """The exporter's labels for an entity's bean; None for one with neither tag (a
    client with no client id, whose bean no quota rule matches)."""
    if isinstance(tags, MetricTags):
        return callback_labels(resource, tags)
    user, client_id = tags
    if not user and not client_id:
        return None
    labels = {"resource": resource}
    if user:
        labels["user"] = sanitized_user(user)
    if client_id:
        labels["clientId"] = client_id
    return labels


def callback_labels(resource: str, tags: MetricTags) -> dict[str, str] | None:
    """A callback's own tags as labels: ``user`` and ``client-id`` as the quota rules name
    them, any other key made a label name (what Prometheus does not allow in one becomes
    ``_``), the values as the callback gave them; empty values are left out, as Kafka's
    JmxReporter leaves them out of the bean's name (None if none is left)."""
    labels = {"resource": resource}
    for key, value in tags.tags:
        if not value:
            continue
        name = _LABELS.get(key) or re.sub(r"[^a-zA-Z0-9_]", "_", key)
        if name[:1].isdigit() or name in labels:
            name = "_" + name
        labels[name] = value
    return labels if len(labels) > 1 else None


_LABELS = {"user": "user", "client-id": "clientId"}


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
            resource = GROUPS[manager.quota_type]
            queue = group_metric(resource, "queue-size")
            yield GaugeMetricFamily(
                queue, f"Tracks the size of the delay queue (kafka.server:type={resource} "
                "queue-size)", value=manager.delay_queue.size(now))
            if isinstance(manager, ClientQuotaManager) and \
                    manager.quota_type == QuotaType.REQUEST:
                yield GaugeMetricFamily(
                    group_metric(resource, "exempt-request-time"),
                    "Tracking exempt-request-time utilization percentage "
                    "(kafka.server:type=Request exempt-request-time)",
                    value=manager.exempt_time.measure(now))
            tracked = manager.tracked(now)
            if not tracked:
                continue
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
            if isinstance(manager, ControllerMutationQuotaManager):
                tokens = family("tokens", "Tracking remaining tokens in the token bucket "
                                          "per user/client-id")
                for tags, bucket_sensor in tracked:
                    labels = quota_labels(resource, tags)
                    if labels is None:
                        continue
                    bound = bucket_sensor.bound
                    tokens.add_sample(tokens.name, labels, UNBOUNDED_TOKENS if bound is None
                                      else bucket_sensor.stat.measure(bound, now))
        yield from families.values()
