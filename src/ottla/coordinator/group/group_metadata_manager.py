"""The groups of one shard (Kafka's GroupMetadataManager): one store of groups of every
kind, a manager per kind of group, and what spans the kinds (replay routing, listing,
deleting, and the ``GroupOffsetsView`` the offsets are checked against).

A group kind's protocol lives in its own manager (ClassicGroupManager,
ConsumerGroupManager, ShareGroupManager), each given the shard context, its configs and the
shared store, with one branch per kind where a question depends on the kind. The classic
protocol's requests are routed by the kind of their group: a consumer group serves classic
members too (online migration, ``migration.py``). Share groups never change kind: a request
of another protocol for a share group's id gets Kafka's error for a group of another type
(INCONSISTENT_GROUP_PROTOCOL for a JoinGroup, GROUP_ID_NOT_FOUND otherwise), and the reverse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import ClassicGroup, ClassicState
from ottla.coordinator.group.classic_group_manager import (
    ClassicGroupManager,
    JoinRequest,
    join_error,
    sync_response,
)
from ottla.coordinator.group.config import GroupConfig
from ottla.coordinator.group.consumer_group_manager import ConsumerGroupManager
from ottla.coordinator.group.consumer_protocol import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicsView,
)
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.group_store import Group, GroupStore
from ottla.coordinator.group.migration import GroupMigration
from ottla.coordinator.group.offset_metadata_manager import (
    MEMBER_EPOCH_COMMIT_VERSION,
    OffsetExpiration,
)
from ottla.coordinator.group.responses import (
    GroupHeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupAnswer,
    ListedGroup,
    SyncGroupResponse,
)
from ottla.coordinator.group.share_group import ShareGroup, ShareGroupConfig
from ottla.coordinator.group.share_group_manager import ShareGroupManager
from ottla.coordinator.runtime import CoordinatorResult, Reply, ShardContext
from ottla.protocol.errors import ErrorCode, KafkaError

E = ErrorCode


class GroupMetadataManager:
    RECORD_KEYS: ClassVar[tuple[type, ...]] = (ClassicGroupManager.RECORD_KEYS
                                               + ConsumerGroupManager.RECORD_KEYS
                                               + ShareGroupManager.RECORD_KEYS)

    def __init__(self, ctx: ShardContext, config: GroupConfig,
                 consumer_config: ConsumerGroupConfig, topics: TopicsView,
                 new_member_id: Callable[[str], str] | None = None,
                 share_config: ShareGroupConfig | None = None,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self.groups = GroupStore()
        self.classic = ClassicGroupManager(ctx, config, self.groups, new_member_id, metrics)
        self.consumer = ConsumerGroupManager(
            ctx, consumer_config, self.groups, topics,
            GroupMigration(config, consumer_config, self.classic, topics), metrics)
        self.share = ShareGroupManager(ctx, share_config or ShareGroupConfig(), self.groups,
                                       topics)
        self._replay: dict[type, Callable[[rec.CoordinatorRecord], None]] = {
            **dict.fromkeys(ClassicGroupManager.RECORD_KEYS, self.classic.replay),
            **dict.fromkeys(ConsumerGroupManager.RECORD_KEYS, self.consumer.replay),
            **dict.fromkeys(ShareGroupManager.RECORD_KEYS, self.share.replay)}

    @staticmethod
    def _is_dead(group: Group) -> bool:
        return isinstance(group, ClassicGroup) and group.is_in(ClassicState.DEAD)

    def _live(self, group_id: str) -> Group | None:
        """The group, unless there is none or it is dead (which answers as none)."""
        group = self.groups.get(group_id)
        return None if group is None or self._is_dead(group) else group

    def _is_empty(self, group: Group) -> bool:
        if isinstance(group, ClassicGroup):
            return self.classic.is_empty(group)
        if isinstance(group, ShareGroup):
            return self.share.is_empty(group)
        return self.consumer.is_empty(group)

    # --- replay and loading ----------------------------------------------------------------

    def replay(self, record: rec.CoordinatorRecord) -> None:
        self._replay[type(record.key)](record)

    def on_loaded(self, now_ms: int) -> None:
        self.classic.on_loaded(now_ms)
        self.consumer.on_loaded(now_ms)
        self.share.on_loaded(now_ms)

    def on_unloaded(self) -> None:
        self.classic.on_unloaded()
        self.consumer.on_unloaded()
        self.share.on_unloaded()

    # --- the classic protocol, routed by the kind of group -----------------------------------

    def join_group(self, now_ms: int, req: JoinRequest, reply: Reply
                   ) -> CoordinatorResult[JoinGroupResponse]:
        """A non-empty consumer group takes the member in; an empty one is deleted and a
        classic group takes its place (whatever the migration policy, as in Kafka)."""
        if self.groups.share(req.group_id) is not None:
            return CoordinatorResult(response=join_error("", E.inconsistent_group_protocol))
        group = self.groups.consumer(req.group_id)
        if group is None:
            return self.classic.join_group(now_ms, req, reply)
        error = self.classic.validate_join(req)
        if error is not None:
            return CoordinatorResult(response=join_error(req.member_id, error))
        if group.members:
            return self.consumer.classic_group_join(now_ms, req)
        tombstones = self.consumer.tombstones(group)
        self.groups.remove(req.group_id)
        result = self.classic.join_group(now_ms, req, reply)
        result.records[:0] = tombstones
        return result

    def sync_group(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   reply: Reply) -> CoordinatorResult[SyncGroupResponse]:
        group = self.groups.consumer(group_id)
        if group is None:
            return self.classic.sync_group(now_ms, group_id, generation_id, member_id,
                                           instance_id, protocol_type, protocol_name,
                                           assignments, reply)
        if not group.members:
            return CoordinatorResult(response=sync_response(E.unknown_member_id))
        return self.consumer.classic_group_sync(now_ms, group_id, generation_id, member_id,
                                                instance_id, protocol_type, protocol_name)

    def heartbeat(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> CoordinatorResult[ErrorCode]:
        if self.groups.consumer(group_id) is None:
            return self.classic.heartbeat(now_ms, group_id, generation_id, member_id,
                                          instance_id)
        return self.consumer.classic_group_heartbeat(now_ms, group_id, generation_id,
                                                     member_id, instance_id)

    def leave_group(self, now_ms: int, group_id: str, members: list[tuple[str, str | None]]
                    ) -> CoordinatorResult[LeaveGroupAnswer]:
        if self.groups.consumer(group_id) is None:
            return self.classic.leave_group(now_ms, group_id, members)
        return self.consumer.classic_group_leave(now_ms, group_id, members)

    def consumer_group_heartbeat(self, now_ms: int, req: HeartbeatRequest
                                 ) -> CoordinatorResult[GroupHeartbeatResponse]:
        """A share group's id is not a consumer group's (Kafka: GROUP_ID_NOT_FOUND)."""
        if self.groups.share(req.group_id) is not None:
            return CoordinatorResult(response={
                "throttle_time": 0, "error_code": E.group_id_not_found,
                "error_message": f"Group {req.group_id} is not a consumer group.",
                "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
                "assignment": None})
        return self.consumer.consumer_group_heartbeat(now_ms, req)

    # --- ListGroups, DeleteGroups ---------------------------------------------------------

    def list_groups(self, states: set[str], types: set[str]) -> list[ListedGroup]:
        result: list[ListedGroup] = []
        for group in self.groups.values():
            if self._is_dead(group):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and group.group_type not in types:
                continue
            result.append({"group_id": group.group_id,
                           "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": group.group_type})
        return result

    def group_ids(self) -> list[str]:
        """A copy: expiring and deleting change the store while the caller walks it."""
        return list(self.groups)

    def validate_delete_group(self, group_id: str) -> ErrorCode | None:
        group = self._live(group_id)
        if group is None:
            return E.group_id_not_found
        if not self._is_empty(group):
            return E.non_empty_group
        return None

    def group_tombstones(self, group_id: str) -> list[rec.CoordinatorRecord]:
        """The records that delete the group (its offsets are the offsets' business)."""
        group = self.groups[group_id]
        if isinstance(group, ClassicGroup):
            return self.classic.tombstones(group)
        if isinstance(group, ShareGroup):
            return self.share.tombstones(group)
        return self.consumer.tombstones(group)

    def maybe_delete_group(self, group_id: str, records: list[rec.CoordinatorRecord]) -> None:
        """Append the group's tombstones if it is empty (its offsets are all gone)."""
        group = self.groups.get(group_id)
        if group is not None and self._is_empty(group):
            records.extend(self.group_tombstones(group_id))

    # --- the GroupOffsetsView of the OffsetMetadataManager ---------------------------------

    def ensure_group(self, group_id: str) -> None:
        if group_id not in self.groups:
            self.classic.create_simple_group(group_id)

    def validate_offset_commit(self, group_id: str, generation_id: int, member_id: str,
                               instance_id: str | None, version: int) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return None  # a simple commit creates an empty group
            return E.group_id_not_found if version >= MEMBER_EPOCH_COMMIT_VERSION \
                else E.illegal_generation
        if isinstance(group, ClassicGroup):
            return self.classic.validate_offset_commit(group, generation_id, member_id,
                                                       instance_id)
        if isinstance(group, ShareGroup):
            return E.group_id_not_found  # share groups commit no offsets
        return self.consumer.validate_offset_commit(group, generation_id, member_id, version)

    def offsets_committed(self, group_id: str, member_id: str) -> None:
        group = self.groups.classic(group_id)
        if group is not None:
            self.classic.offsets_committed(group, member_id)

    def validate_offset_fetch(self, group_id: str, member_id: str | None,
                              member_epoch: int) -> None:
        if self.groups.share(group_id) is not None:
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        group = self.groups.consumer(group_id)
        if group is not None:
            self.consumer.validate_offset_fetch(group, member_id, member_epoch)

    def validate_offset_delete(self, group_id: str) -> ErrorCode | None:
        group = self._live(group_id)
        if group is None:
            return E.group_id_not_found
        if isinstance(group, ClassicGroup):
            return self.classic.validate_offset_delete(group)
        if isinstance(group, ShareGroup):
            return E.group_id_not_found
        return None

    def is_subscribed_to_topic(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        if group is None:
            return False
        if isinstance(group, ClassicGroup):
            return group.is_subscribed_to(topic)
        if isinstance(group, ShareGroup):
            return False
        return self.consumer.is_subscribed_to_topic(group, topic)

    def offset_expiration(self, group_id: str) -> OffsetExpiration | None:
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ShareGroup):
            return None  # no offsets here; not deleted by offset expiry
        if isinstance(group, ClassicGroup):
            return self.classic.offset_expiration(group)
        return self.consumer.offset_expiration(group)
