"""What clients pushed (KIP-714), served with the node's own metrics: one family per
pushed metric name, every client's series in it (``broker.telemetry`` names and labels
them). A name pushed as a counter by one client and as a gauge by another keeps the kind
it had first in the scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ottla.broker.telemetry.client_telemetry_exporter import ClientTelemetryExporter

HELP = "Pushed by clients (KIP-714 client telemetry)"


class ClientTelemetryCollector:
    def __init__(self, exporter: ClientTelemetryExporter, now_ms: Callable[[], int]) -> None:
        self.exporter = exporter
        self.now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for name, counter, labels, value in self.exporter.samples(self.now_ms()):
            family = families.get(name)
            if family is None:
                family = families[name] = CounterMetricFamily(name, HELP) if counter \
                    else GaugeMetricFamily(name, HELP)
            if isinstance(family, CounterMetricFamily) != counter:
                continue
            sample = name + "_total" if counter else name
            family.add_sample(sample, dict(labels), value)
        yield from families.values()
