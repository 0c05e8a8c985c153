"""Share groups (KIP-932) on one shard: ShareGroupHeartbeat and ShareGroupDescribe, the
session timer that fences a silent member, the group's part of the offsets admin APIs
(empty groups only), and the replay of the share-group records (Kafka's
GroupMetadataManager, its share-group half).

As for consumer groups, every change is a record replayed first (``_apply``) and the
handler reads the replayed state back, so a coordinator that loads the partition after a
failover rebuilds the same groups. A fenced member's records need nothing from here: the
partition leaders release them when their acquisition locks time out.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_group import from_topic_partitions, to_topic_partitions
from ottla.coordinator.group.consumer_protocol import TopicsView
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.responses import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribedShareGroup,
    GroupHeartbeatResponse,
)
from ottla.coordinator.group.share_group import (
    ASSIGNOR_NAME,
    LEAVE_EPOCH,
    ShareGroup,
    ShareGroupConfig,
    ShareMember,
    metadata_hash,
    replay_assignment,
    simple_assign,
)
from ottla.coordinator.runtime import CoordinatorResult, ShardContext
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
E = ErrorCode

Records = list[rec.CoordinatorRecord]


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


NON_EMPTY_GROUP = "The group is not empty."
"""Kafka's message for NON_EMPTY_GROUP."""


def _session_key(group_id: str, member_id: str) -> str:
    return f"share-session/{group_id}/{member_id}"


def _error(error: ErrorCode, message: str | None = None) -> GroupHeartbeatResponse:
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


class ShareGroupManager:
    RECORD_KEYS: ClassVar[tuple[type, ...]] = (
        rec.ShareGroupMetadataKey, rec.ShareGroupMemberMetadataKey,
        rec.ShareGroupTargetAssignmentMetadataKey, rec.ShareGroupTargetAssignmentMemberKey,
        rec.ShareGroupCurrentMemberAssignmentKey)

    def __init__(self, ctx: ShardContext, config: ShareGroupConfig, groups: GroupStore,
                 topics: TopicsView) -> None:
        self._ctx = ctx
        self._config = config
        self._groups = groups
        self._topics = topics

    # --- replay ------------------------------------------------------------------------------

    def _group(self, group_id: str, create: bool = False) -> ShareGroup | None:
        group = self._groups.share(group_id)
        if group is None and create:
            group = ShareGroup(group_id)
            self._groups.put(group)
        return group

    def replay(self, record: rec.CoordinatorRecord) -> None:
        key, value = record.key, record.value
        if isinstance(key, rec.ShareGroupMetadataKey):
            if value is None:
                group = self._group(key.group_id)
                if group is not None and not group.members:
                    self._groups.remove(key.group_id)
            else:
                group = self._group(key.group_id, create=True)
                assert group is not None
                group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
            return
        group = self._group(key.group_id, create=value is not None)
        if group is None:
            return
        if isinstance(key, rec.ShareGroupMemberMetadataKey):
            if value is None:
                group.members.pop(key.member_id, None)
                return
            member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
            member.rack_id, member.client_id = value.rack_id, value.client_id
            member.client_host = value.client_host
            member.subscribed_topic_names = tuple(value.subscribed_topic_names)
        elif isinstance(key, rec.ShareGroupTargetAssignmentMetadataKey):
            if value is not None:
                group.assignment_epoch = value.assignment_epoch
        elif isinstance(key, rec.ShareGroupTargetAssignmentMemberKey):
            if value is None:
                group.target.pop(key.member_id, None)
            else:
                group.target[key.member_id] = from_topic_partitions(value.topic_partitions)
        elif isinstance(key, rec.ShareGroupCurrentMemberAssignmentKey):
            member = group.members.get(key.member_id)
            if member is None and value is not None:
                member = group.members[key.member_id] = ShareMember(key.member_id)
            if member is not None:
                replay_assignment(value, member)

    def _apply(self, records: Records) -> None:
        for record in records:
            self.replay(record)

    def on_loaded(self, now_ms: int) -> None:
        """Every member loaded gets a fresh session, as in Kafka."""
        for group in self._groups.values():
            if isinstance(group, ShareGroup):
                for member_id in group.members:
                    self._schedule_session(group.group_id, member_id)

    def on_unloaded(self) -> None:
        """Nothing parked: a heartbeat is answered at once."""

    # --- ShareGroupHeartbeat -----------------------------------------------------------------

    def share_group_heartbeat(self, now_ms: int, req: ShareHeartbeatRequest
                              ) -> CoordinatorResult[GroupHeartbeatResponse]:
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except KafkaError as e:
            return CoordinatorResult(response=_error(e.code, e.message))

    @staticmethod
    def _validate(req: ShareHeartbeatRequest) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        if not req.group_id:
            raise KafkaError(E.invalid_request, "GroupId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise KafkaError(E.invalid_request, "RackId can't be empty.")
        if req.member_epoch == 0:
            if not req.subscribed_topic_names:
                raise KafkaError(E.invalid_request,
                                 "SubscribedTopicNames must be set in first request.")
        elif req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH:
            if not req.member_id:
                raise KafkaError(E.invalid_request, "MemberId can't be empty.")
        else:
            raise KafkaError(E.invalid_request, "MemberEpoch is invalid.")

    def _share_group(self, group_id: str, create: bool) -> ShareGroup:
        """Group ids are one namespace: a share member gets GROUP_ID_NOT_FOUND for a group
        of another type, as in Kafka (no conversion between share and other groups)."""
        group = self._groups.get(group_id)
        if group is None:
            if not create:
                raise KafkaError(E.group_id_not_found, f"Share group {group_id} not found.")
            return ShareGroup(group_id)  # stored when its first record is applied
        if not isinstance(group, ShareGroup):
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a share group.")
        return group

    def _heartbeat(self, req: ShareHeartbeatRequest
                   ) -> CoordinatorResult[GroupHeartbeatResponse]:
        """Kafka's steps: the member's metadata, a group epoch bump if its subscription or
        the subscribed topics changed, the target assignment of a new epoch, then the
        member moves straight to its target."""
        joining = req.member_epoch == 0
        group = self._share_group(req.group_id, create=joining)
        member_id = req.member_id or str(uuid.uuid4())
        old = group.members.get(member_id)
        if old is None:
            if not joining:
                raise KafkaError(E.unknown_member_id, f"Member {member_id} is not a member "
                                 f"of group {req.group_id}.")
            if len(group.members) >= self._config.max_size:
                raise KafkaError(E.group_max_size_reached,
                                 f"The share group has reached its maximum capacity of "
                                 f"{self._config.max_size} members.")
            log.info("[GroupId %s] Member %s joins the share group.", req.group_id, member_id)
        elif not joining:
            self._check_member_epoch(old, req.member_epoch)
        records: Records = []
        was_assigned = None if old is None else {t: set(ps) for t, ps in old.assigned.items()}
        base = old or ShareMember(member_id)
        updated = replace(
            base, assigned=dict(base.assigned), client_id=req.client_id,
            client_host=req.client_host,
            rack_id=req.rack_id if req.rack_id is not None else base.rack_id,
            subscribed_topic_names=tuple(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None else base.subscribed_topic_names)
        subscription_changed = old is None or \
            updated.subscribed_topic_names != old.subscribed_topic_names
        if old is None or not updated.same_metadata(old):
            self._emit(updated.metadata_record(req.group_id), records)
        group = self._share_group(req.group_id, create=False)
        topics = self._topics()
        self._maybe_bump_group_epoch(group, topics, subscription_changed, records)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, topics, records)
        member = self._reconcile(group, member_id, records)
        self._schedule_session(req.group_id, member_id)
        response: GroupHeartbeatResponse = {
            "throttle_time": 0, "error_code": E.none, "error_message": None,
            "member_id": member_id, "member_epoch": member.member_epoch,
            "heartbeat_interval": self._config.heartbeat_interval(req.group_id),
            "assignment": None}
        if joining or member.assigned != was_assigned:
            response["assignment"] = {"topic_partitions": [
                {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                for tp in to_topic_partitions(member.assigned)]}
        return CoordinatorResult(records, response, replay=False)

    @staticmethod
    def _check_member_epoch(member: ShareMember, received: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted
        (the response that bumped it may have been lost)."""
        if received > member.member_epoch:
            raise KafkaError(E.fenced_member_epoch,
                             f"The share group member has a greater member epoch ({received}) "
                             f"than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise KafkaError(E.fenced_member_epoch,
                             f"The share group member has a smaller member epoch ({received}) "
                             f"than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")

    def _emit(self, record: rec.CoordinatorRecord, records: Records) -> None:
        self.replay(record)
        records.append(record)

    def _maybe_bump_group_epoch(self, group: ShareGroup, topics: Mapping[str, Any],
                                subscription_changed: bool, records: Records) -> None:
        new_hash = metadata_hash(topics, group.subscribed_topic_names())
        if subscription_changed or new_hash != group.metadata_hash:
            self._emit(rec.CoordinatorRecord(
                rec.ShareGroupMetadataKey(group_id=group.group_id),
                rec.ShareGroupMetadataValue(epoch=group.group_epoch + 1,
                                            metadata_hash=new_hash)), records)

    def _update_target_assignment(self, group: ShareGroup,
                                  topics: Mapping[str, tuple[uuid.UUID, int]],
                                  records: Records) -> None:
        """The ``simple`` assignor over the members' subscriptions; only the members whose
        target changed get a record, then the new assignment epoch."""
        subscriptions = {m.member_id: frozenset(topics[n][0] for n in m.subscribed_topic_names
                                                if n in topics)
                         for m in group.members.values()}
        partitions = {topic_id: count for topic_id, count in topics.values()}
        target = simple_assign(subscriptions, partitions, group.target)
        for member_id, assignment in sorted(target.items()):
            if group.target.get(member_id, {}) != assignment:
                self._emit(rec.CoordinatorRecord(
                    rec.ShareGroupTargetAssignmentMemberKey(group_id=group.group_id,
                                                            member_id=member_id),
                    rec.ShareGroupTargetAssignmentMemberValue(
                        topic_partitions=to_topic_partitions(assignment))), records)
        self._emit(rec.CoordinatorRecord(
            rec.ShareGroupTargetAssignmentMetadataKey(group_id=group.group_id),
            rec.ShareGroupTargetAssignmentMetadataValue(
                assignment_epoch=group.group_epoch)), records)

    def _reconcile(self, group: ShareGroup, member_id: str, records: Records) -> ShareMember:
        """Kafka's ShareGroupAssignmentBuilder: no revocation, a member takes its target
        and the target's epoch in one step."""
        member = group.members[member_id]
        if member.member_epoch != group.assignment_epoch:
            moved = replace(member, previous_member_epoch=member.member_epoch,
                            member_epoch=group.assignment_epoch,
                            assigned={t: set(ps) for t, ps in
                                      group.target.get(member_id, {}).items()})
            self._emit(moved.assignment_record(group.group_id), records)
        return group.members[member_id]

    # --- leaving and fencing -----------------------------------------------------------------

    def _leave(self, req: ShareHeartbeatRequest) -> CoordinatorResult[GroupHeartbeatResponse]:
        group = self._share_group(req.group_id, create=False)
        if req.member_id not in group.members:
            raise KafkaError(E.unknown_member_id, f"Member {req.member_id} is not a member "
                             f"of group {req.group_id}.")
        log.info("[GroupId %s] Member %s left the share group.", req.group_id, req.member_id)
        records = self._fence(group, req.member_id)
        return CoordinatorResult(records, {
            "throttle_time": 0, "error_code": E.none, "error_message": None,
            "member_id": req.member_id, "member_epoch": LEAVE_EPOCH,
            "heartbeat_interval": 0, "assignment": None}, replay=False)

    def _fence(self, group: ShareGroup, member_id: str) -> Records:
        """Kafka's shareGroupFenceMember: the member's three tombstones and a group epoch
        bump, so the others' next heartbeat computes a target without it."""
        records: Records = []
        gid = group.group_id
        for key in (rec.ShareGroupCurrentMemberAssignmentKey(group_id=gid, member_id=member_id),
                    rec.ShareGroupTargetAssignmentMemberKey(group_id=gid, member_id=member_id),
                    rec.ShareGroupMemberMetadataKey(group_id=gid, member_id=member_id)):
            self._emit(rec.CoordinatorRecord(key, None), records)
        self._emit(rec.CoordinatorRecord(
            rec.ShareGroupMetadataKey(group_id=gid),
            rec.ShareGroupMetadataValue(epoch=group.group_epoch + 1,
                                        metadata_hash=group.metadata_hash)), records)
        self._ctx.cancel(_session_key(gid, member_id))
        return records

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        def expired(_shard: Any, now_ms: int) -> CoordinatorResult:
            group = self._groups.share(group_id)
            if group is None or member_id not in group.members:
                return CoordinatorResult()
            log.info("[GroupId %s] Member %s fenced from the group because its session "
                     "expired.", group_id, member_id)
            return CoordinatorResult(self._fence(group, member_id), replay=False)
        self._ctx.schedule(_session_key(group_id, member_id),
                           self._config.session_timeout(group_id), expired)

    # --- ShareGroupDescribe, and what spans the kinds ----------------------------------------

    def describe_share_group(self, group_id: str) -> DescribedShareGroup:
        """Raises GROUP_ID_NOT_FOUND for a missing group or one of another type."""
        group = self._share_group(group_id, create=False)
        names = {topic_id: name for name, (topic_id, _) in self._topics().items()}
        return {
            "error_code": E.none, "error_message": None, "group_id": group_id,
            "group_state": group.state.value, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch, "assignor_name": ASSIGNOR_NAME,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {"topic_partitions": [
                    {"topic_id": tp.topic_id, "topic_name": names.get(tp.topic_id, ""),
                     "partitions": list(tp.partitions)}
                    for tp in to_topic_partitions(m.assigned)]}}
                for m in group.members.values()],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    # --- the offsets admin APIs (KIP-932) ----------------------------------------------------

    def alter_offsets(self, group_id: str) -> CoordinatorResult[int]:
        """The group's part of AlterShareGroupOffsets (Kafka 4.2+): a share group that does
        not exist yet is created, so offsets can be set before its first member joins
        (KAFKA-19662); one with members gets NON_EMPTY_GROUP, its leaders delivering from
        the current offsets; the group epoch is bumped (KAFKA-20910). The response is the
        new epoch, the least state epoch the offsets are initialized at."""
        group = self._groups.get(group_id)
        if group is not None and not isinstance(group, ShareGroup):
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a share group.")
        if group is not None and group.members:
            raise KafkaError(E.non_empty_group, NON_EMPTY_GROUP)
        epoch = 1 if group is None else group.group_epoch + 1
        records: Records = []
        self._emit(rec.CoordinatorRecord(
            rec.ShareGroupMetadataKey(group_id=group_id),
            rec.ShareGroupMetadataValue(
                epoch=epoch, metadata_hash=0 if group is None else group.metadata_hash)),
            records)
        log.info("[GroupId %s] Share group offsets altered at group epoch %d.", group_id,
                 epoch)
        return CoordinatorResult(records, epoch, replay=False)

    def validate_offsets_deletable(self, group_id: str) -> None:
        """DeleteShareGroupOffsets needs an existing, empty share group (Kafka's
        initiateDeleteShareGroupOffsets): GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP."""
        group = self._groups.get(group_id)
        if group is None:
            raise KafkaError(E.group_id_not_found, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a share group.")
        if group.members:
            raise KafkaError(E.non_empty_group, NON_EMPTY_GROUP)

    def is_empty_share_group(self, group_id: str) -> bool:
        """Whether DeleteGroups deletes ``group_id`` as a share group: its share-partition
        states go first, as Kafka's deleteShareGroups."""
        group = self._groups.get(group_id)
        return isinstance(group, ShareGroup) and not group.members

    def is_empty(self, group: ShareGroup) -> bool:
        return not group.members

    def tombstones(self, group: ShareGroup) -> Records:
        gid = group.group_id
        return [rec.CoordinatorRecord(rec.ShareGroupTargetAssignmentMetadataKey(group_id=gid),
                                      None),
                rec.CoordinatorRecord(rec.ShareGroupMetadataKey(group_id=gid), None)]
