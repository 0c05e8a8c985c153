"""Kafka's sampled metric stats (``org.apache.kafka.common.metrics.stats``): ``Rate``,
``Avg`` and ``Max`` over a ring of time windows, sans-I/O, shared by the client quotas
and KRaft's ``raft-metrics``."""
