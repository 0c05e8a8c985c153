"""A partition replica on this broker: its log joined to its replication state.

The decisions (role, epochs, ISR, high watermark, when an ``acks=all`` write is done)
are the sans-I/O ``PartitionState``; this class feeds it the log's end after each append
and keeps the log's high watermark (which bounds reads, retention and cleaning) equal to
the state's. The replica manager drives it and wakes the purgatories when a method says
the high watermark moved.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ottla.broker.replication.partition_state import (
    NO_EPOCH,
    LeaderAndIsr,
    PartitionState,
    diverging_epoch,
    leader_epoch_entries,
)
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import BatchHeader
from ottla.storage.log import AppendInfo, Log, ReadInfo

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """Where a fetcher's last fetched epoch ends on this leader (Fetch's DivergingEpoch)."""

    epoch: int
    end_offset: int

__all__ = ["NO_EPOCH", "READ_COMMITTED", "READ_UNCOMMITTED", "DivergingEpoch", "LeaderAndIsr",
           "Partition"]


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log,
                 local_broker_id: int, assignment: LeaderAndIsr, now_ms: int = 0,
                 hw_min_isr: int = 0) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        # From no assignment, so that taking this one is a new leader epoch: in-sync
        # followers count as caught up from now, as on any change of leadership.
        self.replication = PartitionState(local_broker_id, LeaderAndIsr(-1, NO_EPOCH, -1, [], []),
                                          log.log_end_offset, log.high_watermark,
                                          hw_min_isr=hw_min_isr)
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
    def epoch_entries(self) -> list[tuple[int, int]]:
        """Where each leader epoch of the log starts, with this leader's own epoch from
        the moment it leads, as Kafka's leader-epoch cache (a follower's: its log's)."""
        entries = self.log.leader_epoch_cache.entries
        if not self.is_leader:
            return entries
        return leader_epoch_entries(entries, self.leader_epoch, self.log.log_end_offset)

    @property
    def high_watermark(self) -> int:
        return self.replication.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided (Kafka: the first unstable offset, at
        most the high watermark): where ``read_committed`` readers stop."""
        unstable = self.log.first_unstable_offset()
        high_watermark = self.high_watermark
        return high_watermark if unstable is None else min(unstable, high_watermark)

    @property
    def lagging_epoch_start_offset(self) -> int | None:
        """This leader's epoch start offset while its high watermark is still below it
        (a new leader whose followers have not fetched what earlier leaders wrote), else
        None: until then offsets a consumer asks for may move backwards (Kafka's
        ``leaderEpochStartOffsetOpt`` against the high watermark)."""
        start = self.replication.leader_epoch_start_offset
        if self.is_leader and start > self.high_watermark:
            return start
        return None

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

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              broker_epoch: int = -1) -> bool:
        """Record a follower's fetch position; True if the high watermark moved."""
        return self._sync(self.replication.on_follower_fetch(replica_id, fetch_offset, now_ms,
                                                             broker_epoch))

    def isr_answered(self, isr: list[int] | None, partition_epoch: int) -> bool:
        return self._sync(self.replication.isr_answered(isr, partition_epoch))

    def check_enough_replicas(self, required_offset: int, leader_epoch: int,
                              min_insync_replicas: int) -> tuple[bool, ErrorCode]:
        return self.replication.check_enough_replicas(required_offset, leader_epoch,
                                                      min_insync_replicas)

    def read(self, fetch_offset: int, max_bytes: int, isolation_level: int,
             current_leader_epoch: int, min_one_batch: bool, last_fetched_epoch: int = NO_EPOCH,
             replica_id: int = -1, fetch_only_leader: bool = True
             ) -> ReadInfo | DivergingEpoch:
        """A fetch of this leader's log (Kafka's ``Partition.fetchRecords``). A consumer
        reads up to the high watermark (or the last stable offset), a follower up to the
        log end. A fetcher whose last fetched epoch ends earlier here than its fetch
        offset has diverged (KIP-320, KIP-595's Fetch v12+): it gets where that epoch
        ends instead of records, and truncates there. A consumer that says where it is
        (Fetch v11+, KIP-392) may read a follower, up to the follower's high watermark."""
        self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_leader)
        if replica_id >= 0 and replica_id not in self.state.replicas:
            # In KRaft a reassignment may add a replica this leader has not seen yet.
            raise KafkaError(ErrorCode.unknown_leader_epoch if current_leader_epoch != NO_EPOCH
                             else ErrorCode.not_leader_or_follower,
                             f"Replica {replica_id} is not a replica of {self.topic}-"
                             f"{self.index} in leader epoch {self.leader_epoch}")
        log = self.log
        if last_fetched_epoch != NO_EPOCH:
            diverged = diverging_epoch(log.leader_epoch_cache, last_fetched_epoch, fetch_offset,
                                       log.log_start_offset, log.log_end_offset,
                                       self.leader_epoch if self.is_leader else NO_EPOCH)
            if diverged is not None:
                return DivergingEpoch(*diverged)
        if replica_id >= 0:
            upper = None
        elif isolation_level == READ_COMMITTED:
            upper = self.last_stable_offset
        else:
            upper = self.high_watermark
        return log.read(fetch_offset, max_bytes, upper, min_one_batch)

    # --- as a follower ----------------------------------------------------------------

    def append_as_follower(self, data: bytes | memoryview, now_ms: int) -> int:
        """Append the leader's batches as they are; how many."""
        appended = self.log.append_as_follower(data, now_ms)
        self.replication.on_local_append(self.log.log_end_offset)
        return appended

    def truncate_to(self, offset: int) -> None:
        """Cut the log back to ``offset`` (a follower whose log diverged from its leader's)."""
        if offset < self.log.log_end_offset:
            self.log.truncate_to(offset)
            self.replication.on_truncation(self.log.log_end_offset)
            self.log.high_watermark = self.replication.high_watermark

    def truncate_fully_and_start_at(self, offset: int, now_ms: int) -> None:
        """Drop the whole log and start empty at ``offset`` (the leader deleted what this
        follower would fetch next)."""
        self.log.truncate_fully_and_start_at(offset, now_ms)
        self.replication.on_truncation(offset)
        self.replication.high_watermark = offset
        self.log.high_watermark = offset

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower's high watermark is its leader's, as far as its own log reaches."""
        return self._sync(self.replication.on_leader_high_watermark(leader_high_watermark))
