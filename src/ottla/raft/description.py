"""What DescribeQuorum reports about the metadata partition, independent of the wire."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplicaDescription:
    replica_id: int
    directory_id: str | None  # Kafka's base64 uuid text
    log_end_offset: int
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(frozen=True)
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaDescription]
    observers: list[ReplicaDescription] = field(default_factory=list)
    endpoints: dict[int, list[tuple[str, str, int]]] = field(default_factory=dict)
    """Per voter: (listener name, host, port)."""
