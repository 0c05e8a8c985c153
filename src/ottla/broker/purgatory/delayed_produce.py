"""An ``acks=all`` produce waiting for its in-sync replicas (Kafka's DelayedProduce).

Sans-I/O: it reads partition state through a narrow view and answers through a
callback; the replica manager's produce purgatory tries it when a partition's high
watermark moves, and expires it at its deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ottla.broker.purgatory.delayed_operation import DelayedOperation
from ottla.common.topics import TopicPartition
from ottla.protocol.errors import ErrorCode


class ReplicatedPartition(Protocol):
    def check_enough_replicas(self, required_offset: int, leader_epoch: int,
                              min_insync_replicas: int) -> tuple[bool, ErrorCode]: ...


@dataclass(slots=True)
class ProducePartitionStatus:
    """One partition of a parked produce: where its write ended, and its outcome."""

    required_offset: int
    """The log end after the append; the high watermark must reach it."""
    leader_epoch: int
    min_insync_replicas: int
    error: ErrorCode = ErrorCode.none
    acks_pending: bool = True


class DelayedProduce(DelayedOperation):
    def __init__(self, deadline_ms: int, statuses: dict[TopicPartition, ProducePartitionStatus],
                 partition: Callable[[TopicPartition], ReplicatedPartition | None],
                 respond: Callable[[dict[TopicPartition, ProducePartitionStatus]], None]
                 ) -> None:
        super().__init__(deadline_ms)
        self.statuses = statuses
        self._partition = partition
        self._respond = respond

    def try_complete(self, now_ms: int) -> bool:
        for tp, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self._partition(tp)
            if partition is None:
                done, error = True, ErrorCode.not_leader_or_follower
            else:
                done, error = partition.check_enough_replicas(
                    status.required_offset, status.leader_epoch, status.min_insync_replicas)
            if done:
                status.acks_pending = False
                status.error = error
        if any(status.acks_pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for status in self.statuses.values():
            if status.acks_pending:
                status.acks_pending = False
                status.error = ErrorCode.request_timed_out

    def on_complete(self) -> None:
        self._respond(self.statuses)
