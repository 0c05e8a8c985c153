"""The network layer's metrics, read when scraped: Kafka's RequestMetrics (requests per
API and version, errors per API and error, and the histograms of times, request sizes and
throttle times), the open client connections and the event loop's idle share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from ottla.protocol.errors import ErrorCode
from ottla.server.metrics.event_loop_idle import EventLoopIdle
from ottla.server.metrics.jmx_names import (
    QUANTILES,
    gauge,
    histogram,
    mean_rate_percent,
    meter,
    yammer_quantile,
)
from ottla.server.metrics.request_metrics import RequestChannelMetrics
from ottla.server.network import KafkaServer

HISTOGRAMS: tuple[tuple[str, str, str], ...] = (
    ("TotalTimeMs", "total",
     "From taking the request to writing its response, in milliseconds"),
    ("LocalTimeMs", "local",
     "In the handler, until it answered or began to wait, in milliseconds"),
    ("RemoteTimeMs", "remote",
     "Waiting (purgatory, the controller, other brokers), in milliseconds"),
    ("ResponseSendTimeMs", "send", "Encoding and writing the response, in milliseconds"),
    ("RequestBytes", "bytes", "The request's body, in bytes"),
    ("ThrottleTimeMs", "throttle", "The throttle time the response carries, in milliseconds"),
)
"""Each histogram of ``kafka.network:type=RequestMetrics`` and the ``RequestMetrics``
list (and sum, ``<list>_sum``) holding it."""


def error_name(code: int) -> str:
    """Kafka's ``Errors.name()`` of a code (the ``error`` tag of ErrorsPerSec); a code
    unknown here is UNKNOWN_SERVER_ERROR, as ``Errors.forCode`` makes it."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return ErrorCode.unknown_server_error.name.upper()


class RequestMetricsCollector:
    """``kafka_network_requestmetrics_requests_total{request, version}``,
    ``kafka_network_requestmetrics_errors_total{request, error}`` and, per request name,
    ``kafka_network_requestmetrics_<histogram>{request, quantile}`` (``totaltimems``,
    ``requestbytes``, ``throttletimems``...) with its ``_count`` and ``_sum``."""

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
        errors = CounterMetricFamily(
            meter("kafka.network", "RequestMetrics", "ErrorsPerSec"),
            "Error codes answered, NONE included, as Kafka's errorCounts counts them "
            "(kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=...,error=... "
            "Count)")
        for name, metrics in by_name:
            by_error: dict[str, int] = {}
            for code, count in metrics.errors.items():
                error = error_name(code)
                by_error[error] = by_error.get(error, 0) + count
            for error, count in sorted(by_error.items()):
                errors.add_sample(errors.name + "_total", {"request": name, "error": error},
                                  count)
        yield errors
        for mbean, attribute, doc in HISTOGRAMS:
            family = SummaryMetricFamily(
                histogram("kafka.network", "RequestMetrics", mbean),
                f"{doc} (kafka.network:type=RequestMetrics,name={mbean},"
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
    rules fold into the name; the listener is a label here instead), and the
    connections each took and closed since the node started (``connection-creation-total``
    and ``connection-close-total``; ``rate()`` of them is Kafka's ``-rate``)."""

    def __init__(self, servers: Callable[[], Iterable[KafkaServer]]) -> None:
        self.servers = servers

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections per listener (kafka.server:type=socket-server-metrics,"
            "listener=... connection-count)", labels=["listener"])
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections taken per listener (kafka.server:type=socket-server-metrics,"
            "listener=... connection-creation-total)", labels=["listener"])
        closed = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_close",
            "Connections closed per listener (kafka.server:type=socket-server-metrics,"
            "listener=... connection-close-total)", labels=["listener"])
        for server in self.servers():
            family.add_metric([server.listener_name], len(server.connections))
            created.add_metric([server.listener_name], server.connections_created)
            closed.add_metric([server.listener_name], server.connections_closed)
        yield family
        yield created
        yield closed


class EventLoopIdleCollector:
    """``kafka_network_socketserver_networkprocessoravgidlepercent``: the event loop's
    idle share, 0..1 (``event_loop_idle`` says how it is measured); and
    ``kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent``, the same loop's
    idle share since it started: the loop is the node's request handler too, and Kafka's
    ``RequestHandlerAvgIdlePercent`` is a meter whose mean rate (since start) the
    exporter's rules serve."""

    def __init__(self, idle: EventLoopIdle) -> None:
        self.idle = idle

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            gauge("kafka.network", "SocketServer", "NetworkProcessorAvgIdlePercent"),
            "The share (0..1) of the last 30 s the event loop's thread spent not running "
            "(kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent Value)",
            value=self.idle.ratio())
        yield GaugeMetricFamily(
            mean_rate_percent("kafka.server", "KafkaRequestHandlerPool",
                              "RequestHandlerAvgIdlePercent"),
            "The share (0..1) of the time since the event loop started that it spent not "
            "running (kafka.server:type=KafkaRequestHandlerPool,"
            "name=RequestHandlerAvgIdlePercent MeanRate)",
            value=self.idle.mean_ratio())
