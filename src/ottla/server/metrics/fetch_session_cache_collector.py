"""Kafka's ``kafka.server:type=FetchSessionCache`` metrics, read when scraped from the
broker's cache of incremental fetch sessions (KIP-227): how many sessions it holds, the
partitions they hold between them, and the sessions evicted to make room for new ones.
Consumers and followers that fetch with sessions keep one each."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ottla.broker.fetch_session import FetchSessionCache
from ottla.server.metrics.jmx_names import gauge, meter

TYPE = "FetchSessionCache"


class FetchSessionCacheCollector:
    """``kafka_server_fetchsessioncache_numincrementalfetchsessions``,
    ``..._numincrementalfetchpartitionscached`` and
    ``..._incrementalfetchsessionevictions_total``."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        cache = self.cache
        for name, value, doc in (
                ("NumIncrementalFetchSessions", len(cache.sessions),
                 "Incremental fetch sessions cached"),
                ("NumIncrementalFetchPartitionsCached", cache.partitions_cached(),
                 "Partitions the cached incremental fetch sessions hold")):
            yield GaugeMetricFamily(gauge("kafka.server", TYPE, name),
                                    f"{doc} (kafka.server:type={TYPE},name={name})",
                                    value=value)
        name = "IncrementalFetchSessionEvictionsPerSec"
        yield CounterMetricFamily(meter("kafka.server", TYPE, name),
                                  "Incremental fetch sessions evicted to make room for "
                                  f"new ones (kafka.server:type={TYPE},name={name} Count)",
                                  value=cache.evictions)
