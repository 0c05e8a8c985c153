"""A partition replica on this broker: its log, its leadership and its high watermark.

Plain state, no I/O of its own beyond the log: the replica manager drives it. Leader epochs
and the high watermark are here from the start so that follower replication (ISR, acks=all
waiting on the high watermark) extends this class rather than replacing it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import BatchHeader
from ottla.storage.log import AppendInfo, Log, ReadInfo

NO_EPOCH = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log,
                 local_broker_id: int, state: PartitionState) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.state = state
        self._maybe_increment_high_watermark()

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: every offset below the high watermark is stable.
        return self.log.high_watermark

    def update_state(self, state: PartitionState) -> None:
        self.state = state
        self._maybe_increment_high_watermark()

    def _maybe_increment_high_watermark(self) -> None:
        """The leader's high watermark is the smallest log end offset in the ISR; with this
        broker the only in-sync replica, that is its own log end offset."""
        if self.is_leader and self.state.isr == [self.local_broker_id]:
            self.log.high_watermark = self.log.log_end_offset

    def check_leader_epoch(self, current_leader_epoch: int, require_leader: bool = True) -> None:
        """Validate a client's view of the leader epoch (KIP-320)."""
        if require_leader and not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"Broker {self.local_broker_id} is not the leader of "
                             f"{self.topic}-{self.index}")
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.state.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"The leader epoch {current_leader_epoch} is older than the "
                             f"current {self.state.leader_epoch}")
        if current_leader_epoch > self.state.leader_epoch:
            raise KafkaError(ErrorCode.unknown_leader_epoch,
                             f"The leader epoch {current_leader_epoch} is newer than the "
                             f"current {self.state.leader_epoch}")

    def append_as_leader(self, batch: bytearray, header: BatchHeader, now_ms: int,
                         required_acks: int, min_insync_replicas: int) -> AppendInfo:
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"This broker is not the leader of {self.topic}-{self.index}")
        if required_acks == -1 and len(self.state.isr) < min_insync_replicas:
            raise KafkaError(ErrorCode.not_enough_replicas,
                             f"The size of the current ISR {self.state.isr} is insufficient to "
                             f"satisfy the min.isr requirement of {min_insync_replicas}")
        info = self.log.append_as_leader(batch, header, self.state.leader_epoch, now_ms)
        self._maybe_increment_high_watermark()
        return info

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int,
             current_leader_epoch: int, min_one_batch: bool) -> ReadInfo:
        self.check_leader_epoch(current_leader_epoch)
        upper = self.last_stable_offset if isolation_level == READ_COMMITTED \
            else self.high_watermark
        return self.log.read(fetch_offset, max_bytes, upper, min_one_batch)
