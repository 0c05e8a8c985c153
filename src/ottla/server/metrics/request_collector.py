"""The network layer's metrics, read when scraped: Kafka's RequestMetrics (requests per
API and version, and the time histograms) and the open client connections."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from ottla.server.metrics.jmx_names import QUANTILES, histogram, meter, yammer_quantile
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.network import KafkaServer

TIMES: tuple[tuple[str, str, str], ...] = (
    ("TotalTimeMs", "total", "From taking the request to writing its response"),
    ("LocalTimeMs", "local", "In the handler, until it answered or began to wait"),
    ("RemoteTimeMs", "remote", "Waiting (purgatory, the controller, other brokers)"),
    ("ResponseSendTimeMs", "send", "Encoding and writing the response"),
)
"""Each histogram of ``kafka.network:type=RequestMetrics`` and the ``RequestMetrics``
list (and sum, ``<list>_sum``) holding it."""


class RequestMetricsCollector:
    """``kafka_network_requestmetrics_requests_total{request, version}`` and, per
    request name, ``kafka_network_requestmetrics_<time>ms{request, quantile}`` with its
    ``_count`` and ``_sum``."""

    def __init__(self, metrics: RequestChannelMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        by_name = sorted(self.metrics.by_name.items())
        requests = CounterMetricFamily(
            meter("kafka.network", "RequestMetrics", "RequestsPerSec"),
            "Requests handled (kafka.network:type=RequestMetrics,name=RequestsPerSec,"
            "request=...,version=... Count)")
        for name, metrics in by_name:
            for version, count in sorted(metrics.requests.items()):
                requests.add_sample(requests.name + "_total",
                                    {"request": name, "version": str(version)}, count)
        yield requests
        for mbean, attribute, doc in TIMES:
            family = SummaryMetricFamily(
                histogram("kafka.network", "RequestMetrics", mbean),
                f"{doc}, in milliseconds (kafka.network:type=RequestMetrics,name={mbean},"
                "request=...); quantiles of the last 1024 requests")
            for name, metrics in by_name:
                recent = metrics.recent(getattr(metrics, attribute))
                for label, quantile in QUANTILES:
                    family.add_sample(family.name, {"request": name, "quantile": label},
                                      yammer_quantile(recent, quantile))
                family.add_sample(family.name + "_count", {"request": name}, metrics.count)
                family.add_sample(family.name + "_sum", {"request": name},
                                  getattr(metrics, attribute + "_sum"))
            yield family


class SocketServerCollector:
    """``kafka_server_socket_server_metrics_connection_count{listener}``: the open
    connections of each listener (Kafka's ``connection-count`` of
    ``kafka.server:type=socket-server-metrics``, whose per-listener beans the example
    rules fold into the name; the listener is a label here instead)."""

    def __init__(self, servers: Callable[[], Iterable[KafkaServer]]) -> None:
        self.servers = servers

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections per listener (kafka.server:type=socket-server-metrics,"
            "listener=... connection-count)", labels=["listener"])
        for server in self.servers():
            family.add_metric([server.listener_name], len(server.connections))
        yield family
