"""What the share coordinator keeps per share-partition (Kafka's SharePartitionKey,
PersisterStateBatch, ShareGroupOffset), and the delta an update record carries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ottla.common.uuids import kafka_uuid_text

UNCHANGED = -1
"""A start offset, leader epoch or delivery-complete count an update leaves as it was."""
UNINITIALIZED_START_OFFSET = -1
"""The start offset of a share-partition nothing has been consumed from yet."""
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
"""KIP-1226: the lag of the share-partition cannot be computed yet."""


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    """A share group's view of one topic partition: the unit of state (and of routing:
    the owning coordinator is the partition of ``coordinator_key``'s hash)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey``: ``group:topicId:partition`` with
        the topic id in Kafka's base64."""
        return f"{self.group_id}:{kafka_uuid_text(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class PersisterStateBatch:
    """A run of offsets with one delivery state (0 available, 2 acknowledged, 4 archived)
    and one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareGroupOffset:
    """A share-partition's whole state: the value of a ShareSnapshot record, and what
    replaying a snapshot and the updates after it gives."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    """When this state was (re)created by a write; a cold snapshot keeps it."""
    write_timestamp: int
    """When the last snapshot of it was written; updates do not move it."""
    state_batches: tuple[PersisterStateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """The value of a ShareUpdate record: a delta on the state since the snapshot of
    ``snapshot_epoch``; ``UNCHANGED`` fields keep their value."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[PersisterStateBatch, ...] = ()
