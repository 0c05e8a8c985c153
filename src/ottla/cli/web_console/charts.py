"""Live charts of throughput and request latency, from the Prometheus endpoints of the
nodes (``--metrics-url``, each node's ``prometheus.listener`` or a Kafka broker's JMX
exporter: the series have the same names). A thread scrapes them every few seconds and
keeps the last five minutes; the counters become rates between two scrapes."""

from __future__ import annotations

import itertools
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass, field

INTERVAL = 2.0
KEEP = 150
"""Samples kept: five minutes at INTERVAL."""

_COUNTERS = {
    "messages_in": "kafka_server_brokertopicmetrics_messagesin_total",
    "bytes_in": "kafka_server_brokertopicmetrics_bytesin_total",
    "bytes_out": "kafka_server_brokertopicmetrics_bytesout_total",
}
_LATENCY = "kafka_network_requestmetrics_totaltimems"
_REQUESTS = ("Produce", "FetchConsumer")


@dataclass
class Sample:
    at: float
    counters: dict[str, float]
    """The all-topics counters, summed over the nodes."""
    p99_ms: dict[str, float]
    """TotalTimeMs' 0.99 quantile per request, the worst node's."""


def scrape(urls: list[str]) -> Sample:
    from prometheus_client.parser import text_string_to_metric_families

    counters = dict.fromkeys(_COUNTERS, 0.0)
    p99: dict[str, float] = {}
    for url in urls:
        with urllib.request.urlopen(url, timeout=INTERVAL) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                for key, name in _COUNTERS.items():
                    if s.name == name and "topic" not in s.labels:
                        counters[key] += s.value
                if s.name == _LATENCY and s.labels.get("quantile") == "0.99" and \
                        s.labels.get("request") in _REQUESTS:
                    request = s.labels["request"]
                    p99[request] = max(p99.get(request, 0.0), s.value)
    return Sample(time.time(), counters, p99)


@dataclass
class Chart:
    title: str
    unit: str
    values: list[float]
    total: float | None = None
    """A counter's increase over the window (None: a gauge)."""
    width: int = 600
    height: int = 120

    @property
    def latest(self) -> float | None:
        return self.values[-1] if self.values else None

    @property
    def top(self) -> float:
        return max(self.values, default=0.0) or 1.0

    @property
    def points(self) -> str:
        """The SVG polyline, the newest value at the right edge."""
        step = self.width / max(KEEP - 1, 1)
        offset = self.width - step * (len(self.values) - 1)
        return " ".join(f"{offset + i * step:.1f},{self.height - v / self.top * self.height:.1f}"
                        for i, v in enumerate(self.values))


@dataclass
class Sampler:
    """Scrapes ``urls`` every INTERVAL seconds on a daemon thread."""

    urls: list[str]
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=KEEP))
    error: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        if self.urls:
            threading.Thread(target=self._run, name="console-metrics", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(scrape(self.urls))
                self.error = None
            except (OSError, ValueError) as e:
                self.error = f"Scraping {', '.join(self.urls)} failed: {e}"
            self._stop.wait(INTERVAL)

    @property
    def last_at(self) -> float:
        """When the newest sample was scraped (0: none yet)."""
        return self.samples[-1].at if self.samples else 0.0

    def charts(self) -> list[Chart]:
        samples = list(self.samples)
        rates: dict[str, list[float]] = {key: [] for key in _COUNTERS}
        totals = dict.fromkeys(_COUNTERS, 0.0)
        for before, after in itertools.pairwise(samples):
            seconds = max(after.at - before.at, 1e-3)
            for key in _COUNTERS:
                # A node restarted counts from 0 again: no rate across it.
                delta = max(after.counters[key] - before.counters[key], 0.0)
                rates[key].append(delta / seconds)
                totals[key] += delta
        return [
            Chart("Records in", "records/s", rates["messages_in"], totals["messages_in"]),
            Chart("Bytes in", "bytes/s", rates["bytes_in"], totals["bytes_in"]),
            Chart("Bytes out to consumers", "bytes/s", rates["bytes_out"],
                  totals["bytes_out"]),
            *(Chart(f"{request} latency, 99th percentile", "ms",
                    [s.p99_ms.get(request, 0.0) for s in samples]) for request in _REQUESTS),
        ]
