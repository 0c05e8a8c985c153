"""The two requests a broker parks: an ``acks=all`` produce waiting for its in-sync
replicas, and a fetch waiting for data (Kafka's ``DelayedProduce`` and ``DelayedFetch``).

Both are sans-I/O: they read partition state through narrow views and answer through a
callback; the replica manager's purgatories try them when a partition's high watermark or
log end moves, and expire them at their deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from ottla.broker.purgatory.delayed_operation import DelayedOperation
from ottla.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
R = TypeVar("R")


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


class DelayedFetch(DelayedOperation, Generic[R]):
    """A fetch that found less than ``min_bytes``. ``read`` reads its partitions again and
    returns the result when the fetch may answer (enough bytes, an error, news for a
    session), else None; at the deadline ``read_anyway`` gives what there is."""

    def __init__(self, deadline_ms: int, read: Callable[[], R | None],
                 read_anyway: Callable[[], R], respond: Callable[[R], None]) -> None:
        super().__init__(deadline_ms)
        self._read = read
        self._read_anyway = read_anyway
        self._respond = respond
        self._result: R | None = None

    def try_complete(self, now_ms: int) -> bool:
        result = self._read()
        if result is None:
            return False
        self._result = result
        return self.force_complete()

    def on_complete(self) -> None:
        result = self._result if self._result is not None else self._read_anyway()
        self._respond(result)

