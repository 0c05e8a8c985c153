"""One ``__share_group_state`` partition's share coordinator (Kafka's
ShareCoordinatorShard), as a shard of the coordinator runtime: the durable state of every
share-partition whose key hashes here, answering Initialize/Write/Read/Delete and
ReadSummary ShareGroupState for the share-partition leaders.

A state is a ShareSnapshot record followed by ShareUpdate deltas: a write is an update
until ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed the last
snapshot, then a fresh snapshot (epoch + 1) of the merged state, so a reload replays a
bounded tail per key. Two timers keep the log short: every
``share.coordinator.cold.partition.snapshot.interval.ms`` share-partitions whose last
snapshot is that old are snapshotted again (so an idle one stops pinning the log start),
and, when the driver listens, every ``share.coordinator.state.topic.prune.interval.ms``
the offset below which every record is redundant is handed to it for DeleteRecords.

Fencing is Kafka's: a write older than the highest leader epoch or state epoch seen for
the key is refused, and a read from a newer leader records its epoch (a ShareUpdate or
snapshot carrying it) before answering. A write or read of a key never initialized is an
INVALID_REQUEST (Kafka 4.1+), as the leader initializes first.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from ottla.coordinator.runtime import CoordinatorResult, ShardContext
from ottla.coordinator.share.combiner import combine_state_batches
from ottla.coordinator.share.offsets import SnapshotOffsets
from ottla.coordinator.share.records import (
    RecordType,
    ShareStateRecord,
    decode,
    encode,
    snapshot_record,
    tombstone,
    update_record,
)
from ottla.coordinator.share.state import (
    UNCHANGED,
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    UNINITIALIZED_START_OFFSET,
    PersisterStateBatch,
    ShareGroupOffset,
    SharePartitionKey,
    ShareUpdate,
)
from ottla.protocol.errors import ErrorCode

__all__ = [
    "DeleteStateAnswer", "InitializeStateAnswer", "PersisterStateBatch", "ReadStateAnswer",
    "ReadStateSummaryAnswer", "ShareCoordinatorConfig", "ShareCoordinatorShard",
    "SharePartitionKey", "ShareStateRecord", "WriteStateAnswer", "decode_record",
    "encode_record",
]

log = logging.getLogger(__name__)

COLD_SNAPSHOT_TIMER = "snapshot-cold-partitions"
PRUNE_TIMER = "prune-state-topic"
NEGATIVE_PARTITION = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
DEFAULT_STATE_EPOCH = 0
DEFAULT_LEADER_EPOCH = 0
"""Kafka's PartitionFactory defaults: what an answer without a state carries."""


@dataclass(frozen=True, slots=True)
class ShareCoordinatorConfig:
    snapshot_update_records_per_snapshot: int = 500
    """``share.coordinator.snapshot.update.records.per.snapshot`` (0 to 500; 0: every
    write is a snapshot)."""
    cold_partition_snapshot_interval_ms: int = 300_000
    """``share.coordinator.cold.partition.snapshot.interval.ms``."""
    prune_interval_ms: int = 300_000
    """``share.coordinator.state.topic.prune.interval.ms``."""


@dataclass(frozen=True, slots=True)
class InitializeStateAnswer:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class WriteStateAnswer:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteStateAnswer:
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReadStateAnswer:
    """ReadShareGroupState's partition result."""

    error: ErrorCode
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    state_batches: tuple[PersisterStateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ReadStateSummaryAnswer:
    """ReadShareGroupStateSummary's partition result."""

    error: ErrorCode
    message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    start_offset: int = UNINITIALIZED_START_OFFSET
    delivery_complete_count: int = UNINITIALIZED_DELIVERY_COMPLETE_COUNT


def encode_record(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    return encode(record)


def decode_record(key: bytes, value: bytes | None) -> ShareStateRecord:
    return decode(key, value)


class ShareCoordinatorShard:
    def __init__(self, ctx: ShardContext, config: ShareCoordinatorConfig,
                 on_prune: Callable[[int], None] | None = None) -> None:
        """``on_prune`` gets, every prune interval, the offset below which the partition
        may be truncated (only once what the shard wrote before is committed)."""
        self.ctx = ctx
        self.config = config
        self.on_prune = on_prune
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self._leader_epochs: dict[SharePartitionKey, int] = {}
        """The highest leader epoch recorded per key: what fences (Kafka's leaderEpochMap;
        a re-initialization does not lower it)."""
        self._state_epochs: dict[SharePartitionKey, int] = {}
        """The highest state epoch snapshotted per key (Kafka's stateEpochMap)."""
        self._updates: dict[SharePartitionKey, int] = {}
        """Update records replayed since each key's last snapshot."""
        self._offsets = SnapshotOffsets()
        self._unplaced: list[ShareStateRecord] = []
        """Records replayed before their append: their offsets come with ``on_written``."""

    # --- the log -------------------------------------------------------------------------

    def replay(self, offset: int, record: ShareStateRecord) -> None:
        key, value = record.key, record.value
        if offset < 0:
            self._unplaced.append(record)
        if value is None:
            # Kafka writes only ShareSnapshot tombstones; one of an update ends the state too.
            self.states.pop(key, None)
            self._leader_epochs.pop(key, None)
            self._state_epochs.pop(key, None)
            self._updates.pop(key, None)
        elif isinstance(value, ShareGroupOffset):
            self._raise_epoch(self._leader_epochs, key, value.leader_epoch)
            self._raise_epoch(self._state_epochs, key, value.state_epoch)
            self.states[key] = value
            self._updates[key] = 0
        else:
            self._raise_epoch(self._leader_epochs, key, value.leader_epoch)
            current = self.states.get(key)
            self.states[key] = _merge(current, value) if current is not None else \
                ShareGroupOffset(value.snapshot_epoch, 0, value.leader_epoch, value.start_offset,
                                 value.delivery_complete_count, 0, 0, value.state_batches)
            self._updates[key] = self._updates.get(key, 0) + 1
        if offset >= 0 and _starts_or_ends_state(record):
            self._offsets.add(offset, key, value is None)

    @staticmethod
    def _raise_epoch(epochs: dict[SharePartitionKey, int], key: SharePartitionKey,
                     epoch: int) -> None:
        if epochs.get(key, epoch) <= epoch:
            epochs[key] = epoch

    def on_written(self, end_offset: int) -> None:
        base = end_offset - len(self._unplaced)
        for i, record in enumerate(self._unplaced):
            if _starts_or_ends_state(record):
                self._offsets.add(base + i, record.key, record.value is None)
        self._unplaced.clear()

    def on_committed(self, high_watermark: int) -> None:
        self._offsets.on_committed(high_watermark)

    def on_loaded(self, now_ms: int) -> None:
        self._schedule_cold_snapshots()
        if self.on_prune is not None:
            self._schedule_prune()

    def on_unloaded(self) -> None: ...

    # --- InitializeShareGroupState ---------------------------------------------------------

    def initialize_state(self, now_ms: int, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> CoordinatorResult:
        """A fresh snapshot with no batches (Kafka's ``initializeState``): the leader's
        first state, or a reset (start offset altered, group re-created). Refused when a
        higher state epoch is recorded."""
        if key.partition < 0:
            return _answer(InitializeStateAnswer(ErrorCode.invalid_request, NEGATIVE_PARTITION))
        if state_epoch != UNCHANGED and self._state_epochs.get(key, state_epoch) > state_epoch:
            return _answer(InitializeStateAnswer(ErrorCode.fenced_state_epoch))
        current = self.states.get(key)
        state = ShareGroupOffset(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=state_epoch, leader_epoch=0, start_offset=start_offset,
            # KIP-1226: a known start offset starts the count; an unknown one cannot.
            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT
            if start_offset == UNINITIALIZED_START_OFFSET else 0,
            create_timestamp=now_ms, write_timestamp=now_ms)
        return CoordinatorResult([snapshot_record(key, state)],
                                 InitializeStateAnswer(ErrorCode.none))

    # --- WriteShareGroupState --------------------------------------------------------------

    def write_state(self, now_ms: int, key: SharePartitionKey, state_epoch: int,
                    leader_epoch: int, start_offset: int, delivery_complete_count: int,
                    batches: Sequence[PersisterStateBatch]) -> CoordinatorResult:
        """Kafka's ``writeState``: a ShareUpdate with the request's batches (combined), or
        a snapshot of the merged state when enough updates followed the last one. The
        stored leader epoch is not moved by a write (a read of the new leader does that);
        ``UNCHANGED`` (-1) epochs are not checked."""
        if key.partition < 0:
            return _answer(WriteStateAnswer(ErrorCode.invalid_request, NEGATIVE_PARTITION))
        if key not in self.states:
            return _answer(WriteStateAnswer(ErrorCode.invalid_request, WRITE_UNINITIALIZED))
        if leader_epoch != UNCHANGED and self._leader_epochs.get(key, leader_epoch) > \
                leader_epoch:
            return _answer(WriteStateAnswer(ErrorCode.fenced_leader_epoch))
        if state_epoch != UNCHANGED and self._state_epochs.get(key, state_epoch) > state_epoch:
            return _answer(WriteStateAnswer(ErrorCode.fenced_state_epoch))
        record = self._state_record(now_ms, key, start_offset, delivery_complete_count,
                                    tuple(batches), None)
        return CoordinatorResult([record], WriteStateAnswer(ErrorCode.none))

    def _state_record(self, now_ms: int, key: SharePartitionKey, start_offset: int,
                      delivery_complete_count: int, batches: tuple[PersisterStateBatch, ...],
                      new_leader_epoch: int | None) -> ShareStateRecord:
        """generateShareStateRecord: an update, or a snapshot once the updates since the
        last one reach the limit."""
        current = self.states[key]
        leader_epoch = current.leader_epoch if new_leader_epoch is None else new_leader_epoch
        if self._updates.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            start = current.start_offset if start_offset == UNCHANGED else start_offset
            return snapshot_record(key, ShareGroupOffset(
                snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch,
                leader_epoch=leader_epoch, start_offset=start,
                delivery_complete_count=current.delivery_complete_count
                if delivery_complete_count == UNCHANGED else delivery_complete_count,
                create_timestamp=now_ms, write_timestamp=now_ms,
                state_batches=tuple(combine_state_batches(current.state_batches, batches,
                                                          start))))
        return update_record(key, ShareUpdate(
            snapshot_epoch=current.snapshot_epoch, leader_epoch=leader_epoch,
            start_offset=start_offset, delivery_complete_count=delivery_complete_count,
            state_batches=tuple(combine_state_batches((), batches, start_offset))))

    # --- ReadShareGroupState ---------------------------------------------------------------

    def read_state(self, now_ms: int, key: SharePartitionKey, leader_epoch: int
                   ) -> CoordinatorResult:
        """Kafka's ``readStateAndMaybeUpdateLeaderEpoch``: the state a new leader starts
        from; a leader epoch newer than the one recorded is written first (a ShareUpdate
        with no batches, or a snapshot when due), fencing the old leader's writes."""
        if key.partition < 0:
            return _answer(ReadStateAnswer(ErrorCode.invalid_request, NEGATIVE_PARTITION))
        state = self.states.get(key)
        if state is None:
            return _answer(ReadStateAnswer(ErrorCode.invalid_request, READ_UNINITIALIZED))
        recorded = self._leader_epochs.get(key)
        if recorded is not None and recorded > leader_epoch:
            return _answer(ReadStateAnswer(ErrorCode.fenced_leader_epoch))
        answer = ReadStateAnswer(ErrorCode.none, None, state.state_epoch, state.start_offset,
                                 state.state_batches)
        if leader_epoch == UNCHANGED or recorded == leader_epoch:
            return _answer(answer)
        log.info("Share-partition %s read by a new leader (epoch %d)", key.coordinator_key,
                 leader_epoch)
        record = self._state_record(now_ms, key, state.start_offset, UNCHANGED, (),
                                    leader_epoch)
        return CoordinatorResult([record], answer)

    def read_state_summary(self, key: SharePartitionKey, leader_epoch: int
                           ) -> ReadStateSummaryAnswer:
        """ReadShareGroupStateSummary (Kafka's ``readStateSummary``), a pure read: a key
        never initialized answers NONE with the defaults. ``leader_epoch`` is taken and
        not checked, as in Kafka."""
        if key.partition < 0:
            return ReadStateSummaryAnswer(ErrorCode.invalid_request, NEGATIVE_PARTITION)
        state = self.states.get(key)
        if state is None:
            return ReadStateSummaryAnswer(ErrorCode.none)
        return ReadStateSummaryAnswer(ErrorCode.none, None, state.state_epoch,
                                      state.leader_epoch, state.start_offset,
                                      state.delivery_complete_count)

    # --- DeleteShareGroupState -------------------------------------------------------------

    def delete_state(self, now_ms: int, key: SharePartitionKey) -> CoordinatorResult:
        """A ShareSnapshot tombstone (Kafka's ``deleteState``); deleting what is not there
        succeeds and writes nothing."""
        if key.partition < 0:
            return _answer(DeleteStateAnswer(ErrorCode.invalid_request, NEGATIVE_PARTITION))
        if key not in self.states:
            return _answer(DeleteStateAnswer(ErrorCode.none))
        return CoordinatorResult([tombstone(key)], DeleteStateAnswer(ErrorCode.none))

    def cleanup_deleted_topics(self, topic_ids: Collection[uuid.UUID]) -> CoordinatorResult:
        """Tombstones for every share-partition of deleted topics (Kafka's
        ``maybeCleanupShareState``)."""
        return CoordinatorResult([tombstone(key) for key in self.states
                                  if key.topic_id in topic_ids])

    # --- timers ----------------------------------------------------------------------------

    def _schedule_cold_snapshots(self) -> None:
        self.ctx.schedule(COLD_SNAPSHOT_TIMER, self.config.cold_partition_snapshot_interval_ms,
                          lambda shard, now: shard.snapshot_cold_partitions(now))

    def _schedule_prune(self) -> None:
        self.ctx.schedule(PRUNE_TIMER, self.config.prune_interval_ms,
                          lambda shard, now: shard.prune(now))

    def snapshot_cold_partitions(self, now_ms: int) -> CoordinatorResult:
        """Kafka's ``snapshotColdPartitions``: a fresh snapshot (same create time) of every
        share-partition whose last snapshot is at least the interval old, so none pins the
        log start for long; nothing at all when every state is already such a cold
        snapshot (a quiet coordinator is not rewritten forever)."""
        self._schedule_cold_snapshots()
        if all(s.create_timestamp != s.write_timestamp for s in self.states.values()):
            return CoordinatorResult()
        interval = self.config.cold_partition_snapshot_interval_ms
        return CoordinatorResult([
            snapshot_record(key, replace(state, snapshot_epoch=state.snapshot_epoch + 1,
                                         write_timestamp=now_ms))
            for key, state in self.states.items()
            if now_ms - state.write_timestamp >= interval])

    def prune(self, now_ms: int) -> CoordinatorResult:
        """Hand the driver the offset to truncate below, once what was written before is
        committed (Kafka's prune job calling ``lastRedundantOffset``)."""
        self._schedule_prune()
        offset = self.last_redundant_offset()
        if offset is not None and self.on_prune is not None:
            self.ctx.respond(self.on_prune, offset)
        return CoordinatorResult()

    def last_redundant_offset(self) -> int | None:
        """Every committed record below this offset is redundant: each share-partition's
        state starts at or after it. None when nothing is."""
        return self._offsets.last_redundant_offset()


def _merge(state: ShareGroupOffset, update: ShareUpdate) -> ShareGroupOffset:
    """An update applied to the state it follows (Kafka's ``merge``)."""
    start = state.start_offset if update.start_offset == UNCHANGED else update.start_offset
    return replace(
        state, start_offset=start,
        leader_epoch=state.leader_epoch if update.leader_epoch == UNCHANGED
        else update.leader_epoch,
        delivery_complete_count=state.delivery_complete_count
        if update.delivery_complete_count == UNCHANGED else update.delivery_complete_count,
        state_batches=tuple(combine_state_batches(state.state_batches, update.state_batches,
                                                  start)))


def _starts_or_ends_state(record: ShareStateRecord) -> bool:
    """A snapshot or a tombstone: what the redundant offset follows."""
    return record.record_type is RecordType.SNAPSHOT or record.value is None


def _answer(response: object) -> CoordinatorResult:
    return CoordinatorResult([], response)
