"""Requests parked until a partition moves (Kafka's DelayedOperationPurgatory and its
delayed produce, fetch and share fetch): sans-I/O, driven by the replica manager and one
deadline timer."""
