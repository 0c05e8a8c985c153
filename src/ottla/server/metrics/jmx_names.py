"""Kafka's MBean names as Prometheus' JMX exporter names them with its example rules for
Kafka brokers (``examples/kafka-2_0_0.yml`` in its repository, ``example_configs/``
before; ``kafka-kraft-3_0_0.yml`` has the same rules for these beans), whose
``lowercaseOutputName: true`` lowers the name (not the labels). Dashboards and alerts
written against a Kafka with that exporter find the same series here.

The rules, in the order the exporter tries them, that make the names used here:

- a meter (``name=...PerSec``), its ``Count``:
  ``kafka.(\\w+)<type=(.+), name=(.+)PerSec\\w*, (.+)=(.+)><>Count`` ->
  ``kafka_$1_$2_$3_total`` with the label ``$4="$5"`` (and the same rule for no further
  key and for two): ``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,
  topic=t`` is ``kafka_server_brokertopicmetrics_messagesin_total{topic="t"}``, the
  topic-less bean (all topics) the same name without the label, and
  ``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9`` is
  ``kafka_network_requestmetrics_requests_total{request="Produce",version="9"}``;
- a gauge, its ``Value``: ``kafka.(\\w+)<type=(.+), name=(.+)><>Value`` ->
  ``kafka_$1_$2_$3``: ``kafka_server_replicamanager_partitioncount``, a dash made an
  underscore as any character Prometheus does not allow in a name
  (``kafka.log:type=LogCleaner,name=max-clean-time-secs`` is
  ``kafka_log_logcleaner_max_clean_time_secs``); and, in the KRaft
  rules, ``kafka.coordinator.(\\w+)<type=(.+), name=(.+)><>Value`` ->
  ``kafka_coordinator_$1_$2_$3``: ``kafka_coordinator_group_groupmetadatamanager_numgroups``;
- a histogram (``TotalTimeMs`` and the other times): its ``NNthPercentile``
  attributes -> ``kafka_$1_$2_$3{quantile="0.NN"}`` (``0.50``, ``0.75``, ``0.95``,
  ``0.98``, ``0.99``, ``0.999``), its ``Count`` -> ``kafka_$1_$2_$3_count``. The rules
  write no ``_sum``; served here as a summary, it has one too.

Kafka's metrics groups (``org.apache.kafka.common.metrics``, not Yammer: a bean per
group whose attributes are the metrics) have rules of their own in
``kafka-kraft-3_0_0.yml``, for ``raft-metrics`` and the other KRaft groups:

- ``kafka.server<type=raft-metrics><>current-state: ([a-z]+)`` (a string) ->
  ``kafka_server_raft_metrics_current_state_info{state="$1"}`` 1, which the 1.x agent
  serves as ``kafka_server_raft_metrics_current_state{state="$1"}`` (its Prometheus
  model keeps no ``_info`` on a gauge's name);
- ``kafka.server<type=(.+)><>([a-z-]+)`` -> ``kafka_server_$1_$2``, the dashes made
  underscores as every character Prometheus does not allow in a name:
  ``kafka_server_raft_metrics_current_leader``.

The client quota metrics (a metrics group per quota type whose beans carry the quota
entity's ``user`` and ``client-id`` keys) have the rules' "Quota specific rules", tried in
this order (``examples/kafka-kraft-3_0_0.yml``; ``example_configs/kafka-2_0_0.yml`` lacks
the third and tries the second first, which then swallows the first's beans):

- ``kafka.server<type=(.+), user=(.+), client-id=(.+)><>([a-z-]+)`` ->
  ``kafka_server_quota_$4`` with labels ``resource="$1"``, ``user="$2"``,
  ``clientId="$3"``;
- ``kafka.server<type=(.+), client-id=(.+)><>([a-z-]+)`` -> ``kafka_server_quota_$3``,
  ``resource`` and ``clientId``;
- ``kafka.server<type=(.+), user=(.+)><>([a-z-]+)`` -> ``kafka_server_quota_$3``,
  ``resource`` and ``user``:
  ``kafka.server:type=Produce,client-id=app`` ``byte-rate`` is
  ``kafka_server_quota_byte_rate{resource="Produce",clientId="app"}``. (In
  ``kafka-kraft-3_0_0.yml`` the KRaft rule ``kafka.server<type=(.+)><>([a-z-]+)``
  comes first and, unanchored, matches these beans too, with the keys in the name; the
  quota rules' names are the ones meant and served here.)
"""

from __future__ import annotations

import re

QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
    ("0.999", 0.999))
"""The ``quantile`` labels the rules make of a Yammer histogram's 50thPercentile,
75thPercentile, 95thPercentile, 98thPercentile, 99thPercentile and 999thPercentile
("0." and the digits), with the quantile each stands for."""


def _name(domain: str, mbean_type: str, name: str) -> str:
    if not domain.startswith("kafka."):
        raise ValueError(f"not a Kafka domain: {domain}")
    # kafka.coordinator.group: the kraft rules' kafka.coordinator.(\w+) makes it
    # kafka_coordinator_group_...
    domain = domain.removeprefix("kafka.").replace(".", "_")
    return re.sub(r"[^a-zA-Z0-9_:]", "_", f"kafka_{domain}_{mbean_type}_{name}").lower()


def meter(domain: str, mbean_type: str, name: str) -> str:
    """The counter of a meter ``domain:type=mbean_type,name=name``, without the
    ``_total`` the counter family adds: ``meter("kafka.server", "BrokerTopicMetrics",
    "MessagesInPerSec")`` is ``kafka_server_brokertopicmetrics_messagesin``."""
    if not name.endswith("PerSec"):
        raise ValueError(f"{name} is not a meter (...PerSec)")
    return _name(domain, mbean_type, name.removesuffix("PerSec"))


def gauge(domain: str, mbean_type: str, name: str) -> str:
    """The gauge of ``domain:type=mbean_type,name=name``'s Value."""
    return _name(domain, mbean_type, name)


def mean_rate_percent(domain: str, mbean_type: str, name: str) -> str:
    """The gauge of a ``...Percent`` meter's ``MeanRate``, by the rule
    ``kafka.(\\w+)<type=(.+), name=(.+)Percent\\w*><>MeanRate`` ->
    ``kafka_$1_$2_$3_percent``:
    ``kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent``."""
    if not name.endswith("Percent"):
        raise ValueError(f"{name} is not a ...Percent meter")
    return _name(domain, mbean_type, name.removesuffix("Percent")) + "_percent"


def group_metric(group: str, attribute: str) -> str:
    """The gauge of attribute ``attribute`` of the metrics group ``group`` of
    ``kafka.server``: ``group_metric("raft-metrics", "high-watermark")`` is
    ``kafka_server_raft_metrics_high_watermark``."""
    return re.sub(r"[^a-zA-Z0-9_:]", "_", f"kafka_server_{group}_{attribute}").lower()


def quota_metric(attribute: str) -> str:
    """The gauge of a client quota metric ``attribute`` (``byte-rate``,
    ``throttle-time``...): ``kafka_server_quota_byte_rate``."""
    return re.sub(r"[^a-zA-Z0-9_:]", "_", f"kafka_server_quota_{attribute}").lower()


def histogram(domain: str, mbean_type: str, name: str) -> str:
    """The quantile series of a histogram (``_count`` and ``_sum`` added to it)."""
    return _name(domain, mbean_type, name)


def yammer_quantile(ordered: list[float], quantile: float) -> float:
    """A quantile of sorted values as Yammer's ``Snapshot.getValue`` (the histograms
    Kafka's JMX shows) computes it: interpolated at ``quantile * (n + 1)``; 0 for none."""
    if not ordered:
        return 0.0
    position = quantile * (len(ordered) + 1)
    if position < 1:
        return ordered[0]
    if position >= len(ordered):
        return ordered[-1]
    lower = ordered[int(position) - 1]
    upper = ordered[int(position)]
    return lower + (position - int(position)) * (upper - lower)
