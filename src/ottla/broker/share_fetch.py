"""The leader's side of share groups (Kafka's SharePartitionManager): one
``SharePartition`` per (share group, partition) this broker leads, the share sessions of
the members fetching from it, and the timer that ends acquisition locks.

A ShareFetch acquires records for its member from each partition of its session (reading
the log from the share-partition's next fetch offset up to the high watermark) and
answers the batches read with the ranges the member now holds; acknowledgements ride on
it or on ShareAcknowledge. A fetch that acquired nothing waits, up to its ``max_wait``,
for a partition's high watermark to move. A session closed by its member (epoch -1)
gives its records back at once; a member that just goes silent loses them when its
locks expire.

The in-flight state lives on this broker only for now: a leader change or a restart
starts each share-partition again from ``share.auto.offset.reset`` (the share
coordinator that makes it durable, ``__share_group_state``, is the next step).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ottla.broker.deadline_timer import DeadlineTimer
from ottla.broker.share_partition import AcquiredRecords, SharePartition
from ottla.common.tasks import wait_event
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.errors import ErrorCode, KafkaError
from ottla.protocol.records import scan_batches

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
SharePartitionKey = tuple[str, str, int]
"""(group id, topic, partition)."""

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(slots=True)
class ShareSession:
    """What a member fetches from this broker: its partitions, and the epoch its next
    request must carry."""

    group_id: str
    member_id: str
    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)


@dataclass(slots=True)
class ShareFetchResult:
    """One partition's answer: the batches read (bytes) and what the member holds."""

    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    error: ErrorCode = ErrorCode.none


class SharePartitionManager:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._moved = asyncio.Event()
        """Set when a high watermark moved: a waiting share fetch looks again."""
        self._timer = DeadlineTimer("share locks", broker.now_ms, self._expire)
        broker.replica_manager.high_watermark_listeners.append(self._on_high_watermark)

    # --- configuration ------------------------------------------------------------------

    def _group_config(self, group_id: str, key: str, broker_key: str) -> Any:
        value = self.broker.image.configs.get((ConfigResourceType.GROUP, group_id), {}).get(key)
        if value is not None:
            return value
        return self.broker.dynamic_config(broker_key)

    def share_partition(self, group_id: str, topic: str, index: int, partition: Any
                        ) -> SharePartition:
        """The group's in-flight state of a partition, started where
        ``share.auto.offset.reset`` says (latest: the high watermark) on first use."""
        key = (group_id, topic, index)
        sp = self.partitions.get(key)
        if sp is None:
            reset = self.broker.image.configs.get(
                (ConfigResourceType.GROUP, group_id), {}).get("share.auto.offset.reset",
                                                            "latest")
            start = partition.log.log_start_offset if reset == "earliest" \
                else partition.high_watermark
            sp = self.partitions[key] = SharePartition(
                start_offset=start,
                max_delivery_count=int(self._group_config(
                    group_id, "share.delivery.count.limit", "group.share.delivery.count.limit")),
                lock_duration_ms=int(self._group_config(
                    group_id, "share.record.lock.duration.ms",
                    "group.share.record.lock.duration.ms")),
                max_record_locks=int(self.broker.dynamic_config(
                    "group.share.partition.max.record.locks")))
        return sp

    # --- sessions -----------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The member's session for this request: a new one at epoch 0, else the one
        whose epoch matches (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND)."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            old = self.sessions.pop(key, None)
            if old is not None:
                self.release(old)
            session = self.sessions[key] = ShareSession(group_id, member_id, 1)
            return session
        session = self.sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found,
                             f"No share session for member {member_id}")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch,
                             f"Expected share session epoch {session.epoch}, got {epoch}")
        if epoch != FINAL_EPOCH:
            session.epoch += 1
        return session

    def close(self, session: ShareSession) -> None:
        self.sessions.pop((session.group_id, session.member_id), None)
        self.release(session)

    def release(self, session: ShareSession) -> None:
        """A member's records go back: available to the others at once."""
        for topic, index in session.partitions:
            sp = self.partitions.get((session.group_id, topic, index))
            if sp is not None and sp.release_member(session.member_id):
                self._moved.set()

    # --- fetching and acknowledging -------------------------------------------------------

    def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                    batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        sp = self.partitions.get((group_id, *tp))
        if sp is None:
            return ErrorCode.invalid_record_state
        error = sp.acknowledge(member_id, batches)
        self._moved.set()  # released records may be fetched again
        return error

    def acquire(self, group_id: str, member_id: str, tp: TopicPartition, max_bytes: int,
                max_records: int, record_limit: bool) -> ShareFetchResult:
        replica_manager = self.broker.replica_manager
        partition = replica_manager.require(tp[0], tp[1], self.broker.image)
        partition.check_leader_epoch(-1)
        sp = self.share_partition(group_id, tp[0], tp[1], partition)
        offset = sp.next_fetch_offset()
        if offset >= partition.high_watermark:
            return ShareFetchResult()
        read = partition.read(offset, max_bytes, 0, -1, True)
        if read.records is None:
            return ShareFetchResult()
        data = read.records.read()
        hw = partition.high_watermark
        fetched = [(h.base_offset, min(h.last_offset, hw - 1)) for _, h in scan_batches(data)
                   if not h.is_control and h.base_offset < hw]
        now = self.broker.now_ms()
        acquired = sp.acquire(member_id, fetched, max_records, now, record_limit)
        if acquired:
            self._timer.deadline_changed(now + sp.lock_duration_ms)
            return ShareFetchResult(records=data, acquired=acquired)
        return ShareFetchResult()

    async def changed(self, timeout_s: float) -> None:
        """Wait for a high watermark to move or records to be given back (or time out)."""
        self._moved.clear()
        await wait_event(self._moved, timeout_s)

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        self._moved.set()

    def _expire(self, now_ms: int) -> int | None:
        deadlines = []
        for sp in self.partitions.values():
            before = sp.acquired_count()
            deadline = sp.expire_locks(now_ms)
            if sp.acquired_count() != before:
                self._moved.set()
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines, default=None)

    def shutdown(self) -> None:
        self._timer.cancel()
