"""A partition replica on this broker: its log joined to its replication state.

The decisions (role, epochs, ISR, high watermark, when an ``acks=all`` write is done)
are the sans-I/O ``PartitionState``; this class feeds it the log's end after each append
and keeps the log's high watermark (which bounds reads, retention and cleaning) equal to
the state's. The replica manager drives it and wakes the purgatories when a method says
the high watermark moved.
"""

from __future__ import annotations

import uuid

from ottla.broker.partition_state import NO_EPOCH, LeaderAndIsr, PartitionState
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import BatchHeader
from ottla.storage.log import AppendInfo, Log, ReadInfo

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

__all__ = ["NO_EPOCH", "READ_COMMITTED", "READ_UNCOMMITTED", "LeaderAndIsr", "Partition"]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log,
                 local_broker_id: int, assignment: LeaderAndIsr, now_ms: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.replication = PartitionState(local_broker_id, assignment, log.log_end_offset,
                                          log.high_watermark)
        self.update_state(assignment, now_ms)

    @property
    def state(self) -> LeaderAndIsr:
        return self.replication.assignment

    @property
    def is_leader(self) -> bool:
        return self.replication.is_leader

    @property
    def leader_epoch(self) -> int:
        return self.replication.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.replication.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.replication.last_stable_offset

    def update_state(self, assignment: LeaderAndIsr, now_ms: int = 0) -> bool:
        """Follow the metadata image; True if the high watermark moved."""
        return self._sync(self.replication.update(assignment, now_ms))

    def _sync(self, moved: bool) -> bool:
        if moved:
            self.log.high_watermark = self.replication.high_watermark
        return moved

    def check_leader_epoch(self, current_leader_epoch: int, require_leader: bool = True) -> None:
        """Validate a client's view of the leader epoch (KIP-320)."""
        if require_leader and not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"Broker {self.local_broker_id} is not the leader of "
                             f"{self.topic}-{self.index}")
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"The leader epoch {current_leader_epoch} is older than the "
                             f"current {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch,
                             f"The leader epoch {current_leader_epoch} is newer than the "
                             f"current {self.leader_epoch}")

    def append_as_leader(self, batch: bytearray, header: BatchHeader, now_ms: int,
                         required_acks: int, min_insync_replicas: int) -> AppendInfo:
        """Append a batch as the leader; the high watermark follows if the ISR allows
        (``high_watermark`` tells the caller whether it moved)."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"This broker is not the leader of {self.topic}-{self.index}")
        isr = self.replication.isr
        if required_acks == -1 and len(isr) < min_insync_replicas:
            raise KafkaError(ErrorCode.not_enough_replicas,
                             f"The size of the current ISR {isr} is insufficient to "
                             f"satisfy the min.isr requirement of {min_insync_replicas}")
        info = self.log.append_as_leader(batch, header, self.leader_epoch, now_ms)
        self._sync(self.replication.on_local_append(self.log.log_end_offset))
        return info

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """Record a follower's fetch position; True if the high watermark moved."""
        return self._sync(self.replication.on_follower_fetch(replica_id, fetch_offset, now_ms))

    def check_enough_replicas(self, required_offset: int, leader_epoch: int,
                              min_insync_replicas: int) -> tuple[bool, ErrorCode]:
        return self.replication.check_enough_replicas(required_offset, leader_epoch,
                                                      min_insync_replicas)

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int,
             current_leader_epoch: int, min_one_batch: bool) -> ReadInfo:
        self.check_leader_epoch(current_leader_epoch)
        upper = self.last_stable_offset if isolation_level == READ_COMMITTED \
            else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, upper, min_one_batch)
