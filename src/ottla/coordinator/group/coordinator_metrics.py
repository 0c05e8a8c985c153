"""The group coordinator's cumulative counts (Kafka's GroupCoordinatorMetrics sensors).

Kept per node, not per shard: Kafka's sensors are global to the broker, so a count does
not fall when a ``__consumer_offsets`` partition moves away."""

from __future__ import annotations


class GroupCoordinatorMetrics:
    """``offset-commit-count``: offsets written by OffsetCommit and TxnOffsetCommit, one
    per partition committed (Kafka records ``records.size()`` per request).
    ``group-completed-rebalance-count``: classic groups made Stable by their leader's
    SyncGroup. ``consumer-group-rebalance-count``: KIP-848 groups' epochs bumped by a
    member's heartbeat or a classic member's JoinGroup. ``offset-deletion-count``: offsets
    OffsetDelete removed (a tombstone each; a group's deletion is not counted, as in
    Kafka). ``offset-expiration-count``: offsets the retention check expired."""

    __slots__ = ("classic_completed_rebalances", "consumer_rebalances", "offset_commits",
                 "offset_deletions", "offset_expirations")

    def __init__(self) -> None:
        self.offset_commits = 0
        self.offset_deletions = 0
        self.offset_expirations = 0
        self.classic_completed_rebalances = 0
        self.consumer_rebalances = 0
