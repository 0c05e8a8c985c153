"""Replica placement for new partitions, striped across brokers (and racks) like Kafka's
StripedReplicaPlacer: each partition starts on the next broker of a rack-alternating
list, so leaders and followers spread evenly."""

from __future__ import annotations

import random
from collections.abc import Sequence

from ottla.metadata.image import BrokerRegistration


def rack_alternating(brokers: Sequence[BrokerRegistration]) -> list[int]:
    """Broker ids ordered so that consecutive ids sit on different racks where possible."""
    by_rack: dict[str | None, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(b.rack, []).append(b.broker_id)
    racks = sorted(by_rack, key=lambda r: (r is None, r or ""))
    ordered: list[int] = []
    for i in range(max((len(v) for v in by_rack.values()), default=0)):
        for rack in racks:
            if i < len(by_rack[rack]):
                ordered.append(by_rack[rack][i])
    return ordered


def usable(brokers: Sequence[BrokerRegistration]) -> list[BrokerRegistration]:
    """The brokers new replicas may go to (Kafka's ``ClusterControlManager.usableBrokers``):
    not a broker whose every log dir is cordoned (KIP-1066)."""
    return [b for b in brokers if b.has_uncordoned_dirs]


def place(num_partitions: int, replication_factor: int,
          brokers: Sequence[BrokerRegistration], rng: random.Random,
          start_partition: int = 0) -> list[list[int]]:
    """Replica lists for ``num_partitions`` new partitions on the usable ``brokers``.

    Raises ValueError when none is usable or fewer than ``replication_factor`` are.
    """
    ordered = rack_alternating(usable(brokers))
    if not ordered:
        raise ValueError(f"Unable to replicate the partition {replication_factor} time(s): "
                         "All brokers are currently fenced, or have all their log "
                         "directories cordoned.")
    if replication_factor > len(ordered):
        raise ValueError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(ordered)} broker(s) are registered or some brokers have all their log "
            "directories cordoned.")
    n = len(ordered)
    start = rng.randrange(n)
    shift = rng.randrange(max(1, n - 1)) if n > 1 else 0
    assignments = []
    for p in range(start_partition, start_partition + num_partitions):
        first = (start + p) % n
        replicas = [ordered[first]]
        for r in range(1, replication_factor):
            replicas.append(ordered[(first + 1 + (shift + r - 1) % (n - 1)) % n])
        assignments.append(replicas)
    return assignments
