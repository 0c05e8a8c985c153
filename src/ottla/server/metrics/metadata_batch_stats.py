"""Kafka's BrokerMetadataListener histograms (``kafka.server:type=BrokerMetadataListener``,
registered by BrokerServerMetrics on nodes with the broker role): per batch of the
metadata log the node applies, its records (``MetadataBatchSizes``; a control batch has
none) and the microseconds its records took to replay (``MetadataBatchProcessingTimeUs``,
publishing left out), as Kafka's MetadataLoader records them."""

from __future__ import annotations

from ottla.server.metrics.log_flush_stats import Reservoir


class MetadataBatchStats:
    def __init__(self) -> None:
        self.sizes = Reservoir()
        self.processing_time_us = Reservoir()

    def loaded(self, records: int, processing_time_us: float) -> None:
        self.sizes.record(records)
        self.processing_time_us.record(processing_time_us)
