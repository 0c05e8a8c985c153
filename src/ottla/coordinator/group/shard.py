"""The group coordinator shard: the groups and offsets of one ``__consumer_offsets``
partition (Kafka's GroupCoordinatorShard, seed 000).

The shard composes the managers that own the state, GroupMetadataManager (the groups, by
kind) and OffsetMetadataManager (committed offsets), routes each replayed record to the
manager of its key type, and delegates every request to its manager. Only what spans both
lives here, as in Kafka: deleting groups (their offsets, then the groups) and the periodic
offset expiration that deletes groups left with nothing.

Sans-I/O: every handler takes ``now_ms`` and returns a CoordinatorResult (records and a
response, of the type its signature names: ``responses.py``), or parks its request and
answers later through ``ctx.respond``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import ClassVar, Protocol

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.assignors import Assignment
from ottla.coordinator.group.classic_group_manager import JoinRequest
from ottla.coordinator.group.config import GroupConfig
from ottla.coordinator.group.consumer_protocol import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicsView,
)
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.group_metadata_manager import GroupMetadataManager
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.offset_metadata_manager import (
    CommittedOffsets,
    OffsetMetadataManager,
)
from ottla.coordinator.group.responses import (
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedShareGroup,
    GroupErrors,
    GroupHeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupAnswer,
    ListedGroup,
    OffsetDeleteAnswer,
    PartitionErrors,
    SyncGroupResponse,
)
from ottla.coordinator.group.share_group import ShareGroupConfig
from ottla.coordinator.group.share_group_manager import ShareHeartbeatRequest
from ottla.coordinator.runtime import (
    CoordinatorResult,
    Reply,
    ShardContext,
    TransactionalRecord,
    TransactionMarker,
)
from ottla.protocol.errors import ErrorCode

__all__ = ["EXPIRE_OFFSETS_KEY", "GroupConfig", "GroupCoordinatorShard", "JoinRequest"]

log = logging.getLogger(__name__)

EXPIRE_OFFSETS_KEY = "expire-offsets"


class _Manager(Protocol):
    """What the shard asks of each manager it composes."""

    RECORD_KEYS: ClassVar[tuple[type, ...]]
    """The record key types this manager replays."""

    def replay(self, record: rec.CoordinatorRecord) -> None: ...

    def on_loaded(self, now_ms: int) -> None: ...

    def on_unloaded(self) -> None: ...


class GroupCoordinatorShard:
    def __init__(self, ctx: ShardContext, config: GroupConfig,
                 new_member_id: Callable[[str], str] | None = None,
                 topics: TopicsView | None = None,
                 consumer_config: ConsumerGroupConfig | None = None,
                 share_config: ShareGroupConfig | None = None,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self._ctx = ctx
        self._config = config
        self.group_metadata = GroupMetadataManager(
            ctx, config, consumer_config or ConsumerGroupConfig(), topics or dict,
            new_member_id, share_config, metrics)
        self.offset_metadata = OffsetMetadataManager(config, self.group_metadata, metrics)
        self._managers: tuple[_Manager, ...] = (self.group_metadata, self.offset_metadata)
        self._replay = {key: manager.replay
                        for manager in self._managers for key in manager.RECORD_KEYS}

    @property
    def groups(self) -> GroupStore:
        return self.group_metadata.groups

    # --- replay and loading: the one path from records to state ----------------------------

    def replay(self, offset: int,
               record: rec.CoordinatorRecord | TransactionalRecord | TransactionMarker) -> None:
        if isinstance(record, TransactionalRecord):
            self.offset_metadata.replay_transactional(record.producer_id, record.record)
        elif isinstance(record, TransactionMarker):
            self.offset_metadata.replay_marker(record.producer_id, record.commit, offset)
        elif isinstance(record.key, rec.OffsetCommitKey):
            self.offset_metadata.replay(record, offset)  # it keeps what is uncommitted
        else:
            self._replay[type(record.key)](record)

    def on_written(self, end_offset: int) -> None:
        self.offset_metadata.on_written(end_offset)

    def on_committed(self, high_watermark: int) -> None:
        self.offset_metadata.on_committed(high_watermark)

    def on_loaded(self, now_ms: int) -> None:
        for manager in self._managers:
            manager.on_loaded(now_ms)
        self._schedule_expiration()

    def on_unloaded(self) -> None:
        for manager in self._managers:
            manager.on_unloaded()

    # --- classic groups ----------------------------------------------------------------------

    def join_group(self, now_ms: int, req: JoinRequest, reply: Reply
                   ) -> CoordinatorResult[JoinGroupResponse]:
        return self.group_metadata.join_group(now_ms, req, reply)

    def sync_group(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   reply: Reply) -> CoordinatorResult[SyncGroupResponse]:
        return self.group_metadata.sync_group(
            now_ms, group_id, generation_id, member_id, instance_id, protocol_type,
            protocol_name, assignments, reply)

    def heartbeat(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> CoordinatorResult[ErrorCode]:
        return self.group_metadata.heartbeat(now_ms, group_id, generation_id, member_id,
                                             instance_id)

    def leave_group(self, now_ms: int, group_id: str, members: list[tuple[str, str | None]]
                    ) -> CoordinatorResult[LeaveGroupAnswer]:
        return self.group_metadata.leave_group(now_ms, group_id, members)

    def describe_group(self, group_id: str) -> DescribedGroup | None:
        return self.group_metadata.classic.describe_group(group_id)

    # --- consumer groups (KIP-848) -----------------------------------------------------------

    def consumer_group_heartbeat(self, now_ms: int, req: HeartbeatRequest
                                 ) -> CoordinatorResult[GroupHeartbeatResponse]:
        return self.group_metadata.consumer_group_heartbeat(now_ms, req)

    def describe_consumer_group(self, group_id: str) -> DescribedConsumerGroup | None:
        return self.group_metadata.consumer.describe_consumer_group(group_id)

    def consumer_target(self, group_id: str, member_id: str) -> Assignment:
        return self.group_metadata.consumer.consumer_target(group_id, member_id)

    # --- share groups (KIP-932) -------------------------------------------------------------

    def share_group_heartbeat(self, now_ms: int, req: ShareHeartbeatRequest
                              ) -> CoordinatorResult[GroupHeartbeatResponse]:
        return self.group_metadata.share.share_group_heartbeat(now_ms, req)

    def describe_share_group(self, group_id: str) -> DescribedShareGroup:
        return self.group_metadata.share.describe_share_group(group_id)

    def alter_share_group_offsets(self, now_ms: int, group_id: str) -> CoordinatorResult[int]:
        """The response is the group's new epoch (see ShareGroupManager.alter_offsets)."""
        return self.group_metadata.share.alter_offsets(group_id)

    def validate_share_group_offsets_deletable(self, group_id: str) -> None:
        self.group_metadata.share.validate_offsets_deletable(group_id)

    def is_empty_share_group(self, group_id: str) -> bool:
        return self.group_metadata.share.is_empty_share_group(group_id)

    # --- offsets -----------------------------------------------------------------------------

    def commit_offsets(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                       instance_id: str | None,
                       offsets: Iterable[tuple[str, int, int, int, str | None]],
                       version: int) -> CoordinatorResult[PartitionErrors]:
        return self.offset_metadata.commit_offsets(now_ms, group_id, generation_id, member_id,
                                                   instance_id, offsets, version)

    def txn_commit_offsets(self, now_ms: int, group_id: str, producer_id: int,
                           producer_epoch: int, generation_id: int, member_id: str,
                           instance_id: str | None,
                           offsets: Iterable[tuple[str, int, int, int, str | None]]
                           ) -> CoordinatorResult[PartitionErrors]:
        return self.offset_metadata.txn_commit_offsets(
            now_ms, group_id, producer_id, producer_epoch, generation_id, member_id,
            instance_id, offsets)

    def transaction_ended(self, now_ms: int, producer_id: int, commit: bool, offset: int
                          ) -> CoordinatorResult[None]:
        """A marker for the producer was written to this partition at ``offset``
        (WriteTxnMarkers): decide its pending offsets as the log's replay will."""
        self.offset_metadata.replay_marker(producer_id, commit, offset)
        return CoordinatorResult()

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> CommittedOffsets:
        return self.offset_metadata.fetch_offsets(group_id, topics, member_id, member_epoch)

    def unstable_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                         ) -> set[tuple[str, int]]:
        return self.offset_metadata.unstable_offsets(group_id, topics)

    def delete_offsets(self, now_ms: int, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> CoordinatorResult[OffsetDeleteAnswer]:
        return self.offset_metadata.delete_offsets(now_ms, group_id, topics)

    # --- across groups and offsets -----------------------------------------------------------

    def list_groups(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        return self.group_metadata.list_groups(states, types)

    def delete_groups(self, now_ms: int, group_ids: list[str]
                      ) -> CoordinatorResult[GroupErrors]:
        """An empty group goes with its offsets: their tombstones, then the group's."""
        records: list[rec.CoordinatorRecord] = []
        results: GroupErrors = {}
        for group_id in group_ids:
            error = self.group_metadata.validate_delete_group(group_id)
            if error is not None:
                results[group_id] = error
                continue
            records.extend(self.offset_metadata.delete_all_offsets(group_id))
            records.extend(self.group_metadata.group_tombstones(group_id))
            results[group_id] = ErrorCode.none
        return CoordinatorResult(records, results)

    def expire_offsets(self, now_ms: int) -> CoordinatorResult[None]:
        """offsets.retention.minutes: an empty group's offsets expire that long after it
        became empty; a consumer group's, that long after their commit once it no longer
        subscribes to their topic. A group left empty with no offsets is deleted."""
        records: list[rec.CoordinatorRecord] = []
        for group_id in self.group_metadata.group_ids():
            if self.offset_metadata.cleanup_expired_offsets(now_ms, group_id, records):
                self.group_metadata.maybe_delete_group(group_id, records)
        if records:
            log.info("Expiring %d offsets and groups", len(records))
        self._schedule_expiration()
        return CoordinatorResult(records)

    def _schedule_expiration(self) -> None:
        self._ctx.schedule(EXPIRE_OFFSETS_KEY, self._config.offsets_retention_check_interval_ms,
                           lambda shard, now: shard.expire_offsets(now))
