"""Partition logs in Kafka's on-disk layout: segments, indexes, recovery, checkpoints."""
