"""What Kafka's CoordinatorRuntimeMetricsImpl registers for the group and share
coordinators (``group-coordinator-metrics``, ``share-coordinator-metrics``), read from
the coordinator runtime when scraped: the partitions by state (``num-partitions`` with
its ``state`` tag as a label), the load times of the last two 30 s windows, and the
event purgatory time histogram (``event-purgatory-time-ms-max``, ``-p50``, ``-p95``,
``-p99``, ``-p999``: the responses released since the previous scrape, as Kafka's
interval histogram gives them).

Kafka's other runtime metrics have no counterpart: there is no event queue (an
operation runs on the event loop when its request arrives, so ``event-queue-size`` and
``event-queue-time-ms`` would be constants), no coordinator threads
(``thread-idle-ratio-avg``: the event loop's idle share is served as the network's),
and no append batching (``batch-*``: each operation appends its own records)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from ottla.broker.coordinators.coordinator_service import CoordinatorService
from ottla.coordinator.runtime import CoordinatorState
from ottla.server.metrics.jmx_names import group_metric

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))
"""The percentiles of Kafka's KafkaMetricHistogram, with their attribute suffixes."""

STATES: tuple[tuple[str, CoordinatorState], ...] = (
    ("loading", CoordinatorState.LOADING), ("active", CoordinatorState.ACTIVE),
    ("failed", CoordinatorState.FAILED))
"""``num-partitions``' ``state`` tag values."""


class CoordinatorRuntimeCollector:
    """``kafka_server_{group,share}_coordinator_metrics_*`` of one coordinator runtime.
    ``now_ms`` is the clock its loads are timed on; ``timer_ms`` the one its purgatory
    times are."""

    def __init__(self, service: CoordinatorService[Any], group: str,
                 now_ms: Callable[[], int], timer_ms: Callable[[], int]) -> None:
        self.service = service
        self.group = group
        self.now_ms = now_ms
        self.timer_ms = timer_ms

    def _gauge(self, attribute: str, doc: str, value: float) -> GaugeMetricFamily:
        return GaugeMetricFamily(group_metric(self.group, attribute),
                                 f"{doc} (kafka.server:type={self.group} {attribute})",
                                 value=value)

    def collect(self) -> Iterator[Metric]:
        runtime = self.service.runtime
        states = [context.state for context in list(runtime.contexts.values())]
        by_state = GaugeMetricFamily(
            group_metric(self.group, "num-partitions"),
            f"The number of partitions in each state (kafka.server:type={self.group},"
            f"state=S num-partitions)", labels=("state",))
        for tag, state in STATES:
            by_state.add_metric((tag,), sum(1 for s in states if s is state))
        yield by_state
        metrics, now_ms = runtime.metrics, self.now_ms()
        yield self._gauge("partition-load-time-max", "The max time it took to load the "
                          "partitions in the last 30 sec",
                          metrics.partition_load_time_max.measure(now_ms))
        yield self._gauge("partition-load-time-avg", "The average time it took to load "
                          "the partitions in the last 30 sec",
                          metrics.partition_load_time_avg.measure(now_ms))
        histogram, timer_ms = metrics.event_purgatory_time, self.timer_ms()
        yield self._gauge("event-purgatory-time-ms-max", "The max event purgatory time in "
                          "milliseconds", histogram.max(timer_ms))
        for suffix, percentile in PERCENTILES:
            yield self._gauge(f"event-purgatory-time-ms-{suffix}",
                              f"The {suffix} event purgatory time in milliseconds",
                              histogram.percentile(percentile, timer_ms))
