"""The consumer group protocol (KIP-848) on one shard: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, session and rebalance timers, and the replay of the consumer-group
records (Kafka's GroupMetadataManager, its consumer-group half). Members that still speak
the classic protocol live in consumer groups too (online migration, seed 000): their
JoinGroup, SyncGroup, Heartbeat and LeaveGroup are served here, against the same target
assignment, with the conversions between group kinds in ``migration.py``.

Unlike classic groups, every change here is a record that is replayed first (``_apply``),
and the handler reads the replayed state back; the runtime is told not to replay again.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import ClassVar

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.assignors import ASSIGNORS, Assignment, MemberSpec
from ottla.coordinator.group.classic import ClassicState
from ottla.coordinator.group.classic_group_manager import (
    MEMBER_ID_REQUIRED_VERSION,
    JoinRequest,
    join_error,
    sync_response,
)
from ottla.coordinator.group.consumer_group import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    copy_assignment,
    from_topic_partitions,
    reconcile,
    to_topic_partitions,
)
from ottla.coordinator.group.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerGroupConfig,
    HeartbeatRequest,
    MalformedProtocol,
    TopicsView,
    by_id,
    by_name,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.migration import GroupMigration
from ottla.coordinator.group.offset_metadata_manager import (
    MEMBER_EPOCH_COMMIT_VERSION,
    OffsetExpiration,
)
from ottla.coordinator.group.responses import (
    AUTHORIZED_OPERATIONS_OMITTED,
    DescribedAssignment,
    DescribedConsumerGroup,
    GroupHeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupAnswer,
    LeftMember,
    SyncGroupResponse,
)
from ottla.coordinator.group.topic_regex import (
    InvalidTopicRegex,
    compile_topic_regex,
    topics_matching,
)
from ottla.coordinator.runtime import CoordinatorResult, ShardContext
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
E = ErrorCode

Topics = Mapping[str, tuple[uuid.UUID, int]]


def _session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session/{group_id}/{member_id}"


def _rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance/{group_id}/{member_id}"


def _join_key(group_id: str, member_id: str) -> str:
    """A classic member told to rejoin must do so within its rebalance timeout."""
    return f"consumer-join/{group_id}/{member_id}"


def _sync_key(group_id: str, member_id: str) -> str:
    """A classic member that joined must sync within its rebalance timeout."""
    return f"consumer-sync/{group_id}/{member_id}"


def _metadata_hash(topics: Topics, names: set[str]) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        if name in topics:
            topic_id, count = topics[name]
            digest.update(f"{name}/{topic_id}/{count};".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


def _heartbeat_error(error: ErrorCode, message: str | None = None) -> GroupHeartbeatResponse:
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


class ConsumerGroupManager:
    RECORD_KEYS: ClassVar[tuple[type, ...]] = (
        rec.ConsumerGroupMetadataKey, rec.ConsumerGroupMemberMetadataKey,
        rec.ConsumerGroupTargetAssignmentMetadataKey,
        rec.ConsumerGroupTargetAssignmentMemberKey,
        rec.ConsumerGroupCurrentMemberAssignmentKey)

    def __init__(self, ctx: ShardContext, config: ConsumerGroupConfig, groups: GroupStore,
                 topics: TopicsView, migration: GroupMigration,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self._ctx = ctx
        self._metrics = metrics
        self._config = config
        self._groups = groups
        self._topics = topics
        self._migration = migration
        self._regex_visible: dict[str, dict[str, Callable[[str], bool]]] = {}
        """By group and regular expression: which of the topics it matches its members
        may see (DESCRIBE), as the last heartbeat of a member using it said (none: all).
        Not stored in the log: after a coordinator moves, the next heartbeats say again."""

    def _schedule(self, key: str, delay_ms: int,
                  operation: Callable[[int], CoordinatorResult]) -> None:
        """A timer calls back into this manager, not through the shard the runtime passes:
        the manager lives exactly as long as its shard's timers (unloading drops both)."""
        self._ctx.schedule(key, delay_ms, lambda _shard, now: operation(now))

    # --- replay ------------------------------------------------------------------------------

    def _group(self, group_id: str, create: bool = False) -> ConsumerGroup | None:
        """The consumer group ``group_id``; ``create`` makes one, replacing an empty
        classic group of that id (whose offsets stay)."""
        group = self._groups.consumer(group_id)
        if group is None and create:
            group = ConsumerGroup(group_id)
            self._groups.put(group)
        return group

    def _stored_group(self, group_id: str) -> ConsumerGroup:
        group = self._groups.consumer(group_id)
        assert group is not None
        return group

    def replay(self, record: rec.CoordinatorRecord) -> None:
        key = record.key
        if isinstance(key, rec.ConsumerGroupMetadataKey):
            self._replay_group_metadata(key, record.value)
            return
        group = self._group(key.group_id, create=record.value is not None)
        if group is None:
            return
        if isinstance(key, rec.ConsumerGroupMemberMetadataKey):
            self._replay_member_metadata(group, key, record.value)
        elif isinstance(key, rec.ConsumerGroupTargetAssignmentMetadataKey):
            self._replay_target_metadata(group, record.value)
        elif isinstance(key, rec.ConsumerGroupTargetAssignmentMemberKey):
            self._replay_target_member(group, key, record.value)
        elif isinstance(key, rec.ConsumerGroupCurrentMemberAssignmentKey):
            self._replay_current_assignment(group, key, record.value)

    def _replay_group_metadata(self, key: rec.ConsumerGroupMetadataKey,
                               value: rec.ConsumerGroupMetadataValue | None) -> None:
        if value is None:
            group = self._group(key.group_id)
            if group is not None and not group.members:
                self._groups.remove(key.group_id)
            return
        group = self._group(key.group_id, create=True)
        assert group is not None
        group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash

    def _replay_member_metadata(self, group: ConsumerGroup,
                                key: rec.ConsumerGroupMemberMetadataKey,
                                value: rec.ConsumerGroupMemberMetadataValue | None) -> None:
        if value is None:
            group.remove_member(key.member_id)
            return
        old = group.members.get(key.member_id) or ConsumerMember(key.member_id)
        group.put_member(replace(
            old, instance_id=value.instance_id, rack_id=value.rack_id,
            client_id=value.client_id, client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic=ClassicMetadata.from_record(value.classic_member_metadata)))

    def _replay_target_metadata(
            self, group: ConsumerGroup,
            value: rec.ConsumerGroupTargetAssignmentMetadataValue | None) -> None:
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp_ms = value.assignment_timestamp

    def _replay_target_member(self, group: ConsumerGroup,
                              key: rec.ConsumerGroupTargetAssignmentMemberKey,
                              value: rec.ConsumerGroupTargetAssignmentMemberValue | None
                              ) -> None:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = from_topic_partitions(value.topic_partitions)

    def _replay_current_assignment(
            self, group: ConsumerGroup, key: rec.ConsumerGroupCurrentMemberAssignmentKey,
            value: rec.ConsumerGroupCurrentMemberAssignmentValue | None) -> None:
        member = group.members.get(key.member_id)
        if member is None:
            member = ConsumerMember(key.member_id)
            group.put_member(member)
        if value is None:
            group.members[key.member_id] = replace(
                member, member_epoch=0, previous_member_epoch=-1,
                state=MemberState.STABLE, assigned={}, pending_revocation={})
        else:
            group.members[key.member_id] = replace(
                member, member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=MemberState(value.state),
                assigned=from_topic_partitions(value.assigned_partitions),
                pending_revocation=from_topic_partitions(value.partitions_pending_revocation))

    def _apply(self, records: list[rec.CoordinatorRecord]) -> None:
        """Replay now, so the handler computes on the state the records describe."""
        for record in records:
            self.replay(record)

    def on_loaded(self, now_ms: int) -> None:
        for group in self._groups.values():
            if isinstance(group, ConsumerGroup):
                for member in group.members.values():
                    self._schedule_session(group.group_id, member.member_id,
                                           self._session_timeout(group.group_id, member))

    def on_unloaded(self) -> None:
        """Nothing parked: a consumer-group heartbeat is answered at once."""

    # --- ConsumerGroupHeartbeat ------------------------------------------------------------

    def consumer_group_heartbeat(self, now_ms: int, req: HeartbeatRequest
                                 ) -> CoordinatorResult[GroupHeartbeatResponse]:
        try:
            self._validate_heartbeat(req)
            if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                return self._consumer_leave(now_ms, req)
            return self._consumer_heartbeat(now_ms, req)
        except KafkaError as e:
            return CoordinatorResult(response=_heartbeat_error(e.code, e.message))

    def _validate_heartbeat(self, req: HeartbeatRequest) -> None:
        if not req.group_id:
            raise KafkaError(E.invalid_request, "GroupId can't be empty.")
        if not req.member_id and req.client_generated_member_id:
            raise KafkaError(E.invalid_request, "MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise KafkaError(E.invalid_request,
                                 "RebalanceTimeoutMs must be provided in first request.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise KafkaError(E.invalid_request, "SubscribedTopicNames or "
                                 "SubscribedTopicRegex must be set in first request.")
        elif not req.member_id:
            raise KafkaError(E.invalid_request, "MemberId can't be empty.")
        if req.member_epoch == LEAVE_STATIC_EPOCH and req.instance_id is None:
            raise KafkaError(E.invalid_request,
                             "InstanceId can't be null when leaving a static member.")
        if req.member_epoch < LEAVE_STATIC_EPOCH:
            raise KafkaError(E.invalid_request, f"MemberEpoch {req.member_epoch} is invalid.")
        if req.server_assignor is not None and \
                req.server_assignor not in self._config.assignors:
            raise KafkaError(E.unsupported_assignor,
                             f"ServerAssignor {req.server_assignor} is not supported. "
                             f"Supported assignors: {', '.join(self._config.assignors)}.")
        if req.subscribed_topic_regex is not None:
            try:
                compile_topic_regex(req.subscribed_topic_regex)  # RE2/J, as Kafka
            except InvalidTopicRegex as e:
                raise KafkaError(E.invalid_regular_expression, str(e)) from None

    def _consumer_heartbeat(self, now_ms: int, req: HeartbeatRequest
                            ) -> CoordinatorResult[GroupHeartbeatResponse]:
        """A join or heartbeat, in Kafka's steps: find the group and the member, record
        what changed in the member, bump the group epoch if the subscriptions or their
        topics changed, maybe compute a new target assignment, then move the member one
        step toward its target and answer with where it now stands."""
        records: list[rec.CoordinatorRecord] = []
        group = self._group_to_join(req, records)
        member_id = req.member_id or str(uuid.uuid4())
        previous = self._member_to_update(group, member_id, req, records)
        subscription_changed = self._update_member_metadata(group, previous, req, records)
        group = self._stored_group(req.group_id)  # a new group exists once its member does
        self._note_regex_visibility(group, member_id, req)
        topics = self._topics()
        self._maybe_bump_group_epoch(group, topics, subscription_changed, records)
        self._maybe_update_target_assignment(group, topics, now_ms, records)
        member = self._reconcile_member(group, member_id, req.owned, records)
        self._schedule_member_timers(req.group_id, member)
        return CoordinatorResult(records, self._heartbeat_response(req, member, previous),
                                 replay=False)

    def _group_to_join(self, req: HeartbeatRequest, records: list[rec.CoordinatorRecord]
                       ) -> ConsumerGroup:
        """The member's group; a new one (not stored until its first record is applied)
        for a member joining a group that does not exist yet or an empty classic group
        (whose tombstone goes first; its offsets stay). A member joining a non-empty
        classic group upgrades it (online migration) if the policy allows."""
        classic = self._groups.classic(req.group_id)
        if classic is not None and not classic.is_in(ClassicState.EMPTY, ClassicState.DEAD):
            if req.member_epoch != 0:
                raise KafkaError(E.group_id_not_found,
                                 f"Group {req.group_id} is not a consumer group.")
            group = self._migration.upgrade(classic, records)
            if len(group.members) >= self._config.max_size and \
                    group.static_members.get(req.instance_id or "") is None:
                raise KafkaError(E.group_max_size_reached,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self._config.max_size} members.")
            # Nothing below may fail now: the converted group is state from here on.
            self._groups.put(group)
            self._migration.upgraded(classic)
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id,
                                       self._session_timeout(group.group_id, member))
            return group
        group = self._group(req.group_id)
        if group is None and req.member_epoch != 0:
            raise KafkaError(E.group_id_not_found, f"Consumer group {req.group_id} not found.")
        if group is None:
            if classic is not None:
                records.append(rec.CoordinatorRecord(rec.GroupMetadataKey(group=req.group_id),
                                                     None))
            group = ConsumerGroup(req.group_id)
        return group

    def _member_to_update(self, group: ConsumerGroup, member_id: str, req: HeartbeatRequest,
                          records: list[rec.CoordinatorRecord]) -> ConsumerMember:
        """The member as the group knows it (a blank one for a new member), after checking
        that it may join (group size, a static identity in use) or that its epoch is
        current. A returning static member takes over its predecessor here."""
        old = group.members.get(member_id)
        if req.member_epoch != 0:
            if old is None:
                raise KafkaError(E.unknown_member_id,
                                 f"Member {member_id} is not a member of group "
                                 f"{req.group_id}.")
            self._check_member_epoch(old, req)
            return old
        if old is None and len(group.members) >= self._config.max_size:
            raise KafkaError(E.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self._config.max_size} members.")
        if req.instance_id is not None:
            previous_id = group.static_members.get(req.instance_id)
            if previous_id is not None and previous_id != member_id:
                previous = group.members[previous_id]
                if previous.member_epoch != LEAVE_STATIC_EPOCH and \
                        not previous.uses_classic_protocol:
                    raise KafkaError(E.unreleased_instance_id,
                                     f"Static member {req.instance_id} with instance id "
                                     "is still in use.")
                records += self._replace_static_consumer(group, previous, member_id)
                old = group.members.get(member_id)
        return old if old is not None else ConsumerMember(member_id)

    def _update_member_metadata(self, group: ConsumerGroup, base: ConsumerMember,
                                req: HeartbeatRequest,
                                records: list[rec.CoordinatorRecord]) -> bool:
        """Record what the request changes in the member; True if it is new or changed
        what it subscribes to (which bumps the group epoch)."""
        updated = replace(
            base,
            instance_id=req.instance_id if req.instance_id is not None else base.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else base.rack_id,
            client_id=req.client_id, client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1 else base.rebalance_timeout_ms,
            subscribed_topic_names=tuple(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None else base.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex
            if req.subscribed_topic_regex is not None else base.subscribed_topic_regex,
            server_assignor=req.server_assignor
            if req.server_assignor is not None else base.server_assignor,
            classic=None)
        return self._record_member(group, updated, records)

    def _record_member(self, group: ConsumerGroup, updated: ConsumerMember,
                       records: list[rec.CoordinatorRecord]) -> bool:
        """Write and apply the member's metadata if it changed; True if it is new or
        changed what it subscribes to (which bumps the group epoch)."""
        known = group.members.get(updated.member_id)
        changed = known is None
        if known is None or not updated.same_metadata(known):
            if known is not None:
                changed = (updated.subscribed_topic_names, updated.subscribed_topic_regex,
                           updated.server_assignor) != (known.subscribed_topic_names,
                                                        known.subscribed_topic_regex,
                                                        known.server_assignor)
            metadata = [updated.metadata_record(group.group_id)]
            self._apply(metadata)
            records += metadata
        return changed

    def _maybe_bump_group_epoch(self, group: ConsumerGroup, topics: Topics,
                                subscription_changed: bool,
                                records: list[rec.CoordinatorRecord]) -> None:
        """A new group epoch when a subscription changed or the subscribed topics did (new
        partitions, a topic recreated): the target assignment is then out of date."""
        metadata_hash = _metadata_hash(topics, self._subscribed_names(group, topics))
        if subscription_changed or metadata_hash != group.metadata_hash:
            bump = [rec.CoordinatorRecord(
                rec.ConsumerGroupMetadataKey(group_id=group.group_id),
                rec.ConsumerGroupMetadataValue(epoch=group.group_epoch + 1,
                                               metadata_hash=metadata_hash))]
            self._apply(bump)
            records += bump
            if self._metrics is not None:
                self._metrics.consumer_rebalances += 1

    def _maybe_update_target_assignment(self, group: ConsumerGroup, topics: Topics,
                                        now_ms: int,
                                        records: list[rec.CoordinatorRecord]) -> None:
        """Compute the target assignment of the new group epoch, at most once per
        the group's assignment interval (consumer.assignment.interval.ms, else
        group.consumer.assignment.interval.ms)."""
        if group.group_epoch > group.assignment_epoch and now_ms - \
                group.assignment_timestamp_ms >= self._config.assignment_interval(group.group_id):
            target = self._target_assignment_records(group, topics, now_ms)
            self._apply(target)
            records += target

    def _reconcile_member(self, group: ConsumerGroup, member_id: str,
                          owned: Assignment | None,
                          records: list[rec.CoordinatorRecord]) -> ConsumerMember:
        """One step of the member toward its target (revoke before assign)."""
        member = group.members[member_id]
        target = group.target.get(member_id, {})
        reconciled = reconcile(group, member, target, group.assignment_epoch, owned)
        if not reconciled.same_assignment(member):
            assignment = [reconciled.assignment_record(group.group_id)]
            self._apply(assignment)
            records += assignment
        return group.members[member_id]

    def _schedule_member_timers(self, group_id: str, member: ConsumerMember) -> None:
        """Restart the session; a member that must revoke gets its rebalance timeout."""
        self._schedule_session(group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self._schedule_rebalance(group_id, member.member_id, member.member_epoch,
                                     member.rebalance_timeout_ms)
        else:
            self._ctx.cancel(_rebalance_key(group_id, member.member_id))

    def _heartbeat_response(self, req: HeartbeatRequest, member: ConsumerMember,
                            previous: ConsumerMember) -> GroupHeartbeatResponse:
        """The assignment is sent when it changed, when the client's view of it is off, or
        in full (a join, or a request with its whole state)."""
        full = req.member_epoch == 0 or (req.owned is not None and
                                         req.subscribed_topic_names is not None)
        response: GroupHeartbeatResponse = {
            "throttle_time": 0, "error_code": E.none, "error_message": None,
            "member_id": member.member_id, "member_epoch": member.member_epoch,
            "heartbeat_interval": self._config.heartbeat_interval(req.group_id),
            "assignment": None}
        if full or member.assigned != previous.assigned or \
                (req.owned is not None and req.owned != member.assigned):
            response["assignment"] = {"topic_partitions": [
                {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                for tp in to_topic_partitions(member.assigned)]}
        return response

    def _check_member_epoch(self, member: ConsumerMember, req: HeartbeatRequest) -> None:
        received = req.member_epoch
        if received > member.member_epoch:
            raise KafkaError(E.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({received}) "
                             f"than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch:
            # A lost response: the member may retry with its previous epoch if it owns
            # nothing beyond what it was given.
            owned = req.owned or {}
            if received != member.previous_member_epoch or any(
                    ps - member.assigned.get(t, set()) for t, ps in owned.items()):
                raise KafkaError(E.fenced_member_epoch,
                                 f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its "
                                 "partitions and rejoin.")

    def _note_regex_visibility(self, group: ConsumerGroup, member_id: str,
                               req: HeartbeatRequest) -> None:
        """Remember which topics the regular expression of the member may show (Kafka
        resolves it with the context of the heartbeat), and forget the expressions no
        member of the group uses any more."""
        visible = self._regex_visible.setdefault(group.group_id, {})
        member = group.members.get(member_id)
        regex = member.subscribed_topic_regex if member is not None else None
        if regex:
            if req.regex_topics_visible is None:
                visible.pop(regex, None)
            else:
                visible[regex] = req.regex_topics_visible
        used = {m.subscribed_topic_regex for m in group.members.values()}
        for stale in [r for r in visible if r not in used]:
            del visible[stale]
        if not visible:
            del self._regex_visible[group.group_id]

    def _matching(self, group_id: str, regex: str, topics: Topics) -> list[str]:
        matched = topics_matching(regex, topics)
        visible = self._regex_visible.get(group_id, {}).get(regex)
        return matched if visible is None else [t for t in matched if visible(t)]

    def _subscribed_names(self, group: ConsumerGroup, topics: Topics) -> set[str]:
        names = set(group.subscribed_topic_names())
        for member in group.members.values():
            if member.subscribed_topic_regex:
                names.update(self._matching(group.group_id, member.subscribed_topic_regex,
                                            topics))
        return names

    def _member_topics(self, group_id: str, member: ConsumerMember, topics: Topics
                       ) -> frozenset[uuid.UUID]:
        ids = {topics[n][0] for n in member.subscribed_topic_names if n in topics}
        if member.subscribed_topic_regex:
            ids.update(topics[t][0] for t in self._matching(
                group_id, member.subscribed_topic_regex, topics))
        return frozenset(ids)

    def _target_assignment_records(self, group: ConsumerGroup, topics: Topics,
                                   now_ms: int) -> list[rec.CoordinatorRecord]:
        assignor = ASSIGNORS[group.preferred_assignor(self._config.assignors[0])]
        specs = {m.member_id: MemberSpec(
            self._member_topics(group.group_id, m, topics),
            {t: frozenset(ps) for t, ps in group.target.get(m.member_id, {}).items()})
            for m in group.members.values()}
        partitions = {topic_id: count for topic_id, count in topics.values()}
        new_target = assignor(specs, partitions)
        records = []
        for member_id, assignment in new_target.items():
            if group.target.get(member_id, {}) != {t: ps for t, ps in assignment.items() if ps}:
                records.append(rec.CoordinatorRecord(
                    rec.ConsumerGroupTargetAssignmentMemberKey(group_id=group.group_id,
                                                               member_id=member_id),
                    rec.ConsumerGroupTargetAssignmentMemberValue(
                        topic_partitions=to_topic_partitions(assignment))))
        records.append(rec.CoordinatorRecord(
            rec.ConsumerGroupTargetAssignmentMetadataKey(group_id=group.group_id),
            rec.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.group_epoch,
                                                           assignment_timestamp=now_ms)))
        return records

    def _replace_static_consumer(self, group: ConsumerGroup, previous: ConsumerMember,
                                 new_id: str) -> list[rec.CoordinatorRecord]:
        """KIP-345 under KIP-848: the returning instance takes over the old member's
        assignment and epoch under its new member id."""
        self._cancel_timers(group.group_id, previous.member_id)
        successor = replace(previous, member_id=new_id,
                            member_epoch=previous.previous_member_epoch
                            if previous.member_epoch == LEAVE_STATIC_EPOCH
                            else previous.member_epoch)
        records = self._member_tombstones(group.group_id, previous.member_id)
        records.append(successor.metadata_record(group.group_id))
        target = group.target.get(previous.member_id)
        if target is not None:
            records.append(rec.CoordinatorRecord(
                rec.ConsumerGroupTargetAssignmentMemberKey(group_id=group.group_id,
                                                           member_id=new_id),
                rec.ConsumerGroupTargetAssignmentMemberValue(
                    topic_partitions=to_topic_partitions(target))))
        records.append(successor.assignment_record(group.group_id))
        self._apply(records)
        return records

    # --- leaving and fencing ---------------------------------------------------------------

    def _member_tombstones(self, group_id: str, member_id: str) -> list[rec.CoordinatorRecord]:
        return [
            rec.CoordinatorRecord(rec.ConsumerGroupCurrentMemberAssignmentKey(
                group_id=group_id, member_id=member_id), None),
            rec.CoordinatorRecord(rec.ConsumerGroupTargetAssignmentMemberKey(
                group_id=group_id, member_id=member_id), None),
            rec.CoordinatorRecord(rec.ConsumerGroupMemberMetadataKey(
                group_id=group_id, member_id=member_id), None),
        ]

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (_session_key, _rebalance_key, _join_key, _sync_key):
            self._ctx.cancel(key(group_id, member_id))

    def _fence_records(self, group: ConsumerGroup, member_id: str, now_ms: int
                       ) -> list[rec.CoordinatorRecord]:
        """Remove a member; the last consumer-protocol member of a group of classic ones
        takes the group back to a classic group (online downgrade) if the policy allows."""
        self._cancel_timers(group.group_id, member_id)
        if self._migration.can_downgrade(group, member_id):
            remaining = [m for m in group.members if m != member_id]
            downgraded = self._migration.downgrade(group, member_id, now_ms)
            if downgraded is not None:
                for other in remaining:
                    self._cancel_timers(group.group_id, other)
                return downgraded
        records = self._member_tombstones(group.group_id, member_id)
        self._apply(records)
        return records + self._bump_after_removal(group, now_ms)

    def _bump_after_removal(self, group: ConsumerGroup, now_ms: int
                            ) -> list[rec.CoordinatorRecord]:
        """A new group epoch once members are gone (their partitions go to the others)."""
        topics = self._topics()
        bump = [rec.CoordinatorRecord(
            rec.ConsumerGroupMetadataKey(group_id=group.group_id),
            rec.ConsumerGroupMetadataValue(
                epoch=group.group_epoch + 1,
                metadata_hash=_metadata_hash(topics, self._subscribed_names(group, topics))))]
        if not group.members:
            # Nobody left to assign to: the next member starts from a fresh assignment.
            bump.append(rec.CoordinatorRecord(
                rec.ConsumerGroupTargetAssignmentMetadataKey(group_id=group.group_id),
                rec.ConsumerGroupTargetAssignmentMetadataValue(
                    assignment_epoch=group.group_epoch + 1, assignment_timestamp=0)))
            group.state_timestamp_ms = now_ms
        self._apply(bump)
        return bump

    def _consumer_leave(self, now_ms: int, req: HeartbeatRequest
                        ) -> CoordinatorResult[GroupHeartbeatResponse]:
        group = self._group(req.group_id)
        if group is None:
            raise KafkaError(E.unknown_member_id, f"Group {req.group_id} does not exist.")
        member_id = req.member_id
        if req.instance_id is not None:
            known = group.static_members.get(req.instance_id)
            if known is None:
                raise KafkaError(E.unknown_member_id, f"Instance id {req.instance_id} is "
                                 "unknown.")
            if known != member_id:
                raise KafkaError(E.fenced_instance_id, f"Static member {member_id} with "
                                 f"instance id {req.instance_id} was replaced.")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Member {member_id} is unknown.")
        response: GroupHeartbeatResponse = {
            "throttle_time": 0, "error_code": E.none, "error_message": None,
            "member_id": member_id, "member_epoch": req.member_epoch,
            "heartbeat_interval": 0, "assignment": None}
        if req.member_epoch == LEAVE_STATIC_EPOCH:
            # A static member that leaves keeps its place until its session times out.
            held = replace(member, previous_member_epoch=member.member_epoch,
                           member_epoch=LEAVE_STATIC_EPOCH)
            records = [held.assignment_record(req.group_id)]
            self._apply(records)
            return CoordinatorResult(records, response, replay=False)
        return CoordinatorResult(self._fence_records(group, member_id, now_ms), response,
                                 replay=False)

    def _session_timeout(self, group_id: str, member: ConsumerMember) -> int:
        """A classic member keeps the session timeout it joined with."""
        return member.classic.session_timeout_ms if member.classic is not None \
            else self._config.session_timeout(group_id)

    def _schedule_session(self, group_id: str, member_id: str,
                          timeout_ms: int | None = None) -> None:
        self._schedule(_session_key(group_id, member_id),
                       self._config.session_timeout(group_id) if timeout_ms is None
                       else timeout_ms,
                       lambda now: self._session_expired(now, group_id, member_id))

    def _schedule_rebalance(self, group_id: str, member_id: str, epoch: int,
                            timeout_ms: int) -> None:
        key = _rebalance_key(group_id, member_id)
        if self._ctx.is_scheduled(key):
            return
        self._schedule(key, max(timeout_ms, 0),
                       lambda now: self._rebalance_expired(now, group_id, member_id, epoch))

    def _session_expired(self, now_ms: int, group_id: str, member_id: str
                         ) -> CoordinatorResult:
        group = self._group(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult()
        log.info("Member %s of consumer group %s fenced (session timeout)", member_id,
                 group_id)
        return CoordinatorResult(self._fence_records(group, member_id, now_ms), replay=False)

    def _rebalance_expired(self, now_ms: int, group_id: str, member_id: str,
                           epoch: int) -> CoordinatorResult:
        group = self._group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.member_epoch != epoch or \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            return CoordinatorResult()
        log.info("Member %s of consumer group %s fenced (did not revoke within its rebalance "
                 "timeout)", member_id, group_id)
        return CoordinatorResult(self._fence_records(group, member_id, now_ms), replay=False)

    # --- classic members in a consumer group (online migration) ---------------------------

    def classic_group_join(self, now_ms: int, req: JoinRequest
                           ) -> CoordinatorResult[JoinGroupResponse]:
        """Kafka's classicGroupJoinToConsumerGroup: the member's embedded subscription
        makes it a member like any other, reconciled toward the server-side target in one
        step per JoinGroup (its owned partitions come in the subscription). The response
        is final at once: there is no barrier and no leader, the generation is the member
        epoch, and SyncGroup hands out the assignment."""
        try:
            group = self._stored_group(req.group_id)
            unknown = not req.member_id
            member_id = str(uuid.uuid4()) if unknown else req.member_id
            if not self._migration.classic_joins_allowed():
                raise KafkaError(E.inconsistent_group_protocol,
                                 f"Group {req.group_id} is a consumer group and "
                                 "group.consumer.migration.policy is disabled.")
            if len(group.members) >= self._config.max_size and member_id not in group.members:
                raise KafkaError(E.group_max_size_reached,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self._config.max_size} members.")
            if not group.supports_classic_protocols(req.protocol_type,
                                                    {name for name, _ in req.protocols}):
                raise KafkaError(E.inconsistent_group_protocol,
                                 f"Member {member_id}'s protocols are not supported.")
            if unknown and req.group_instance_id is None and \
                    req.version >= MEMBER_ID_REQUIRED_VERSION:
                # KIP-394: nothing is stored until the member comes back with its id.
                return CoordinatorResult(response=join_error(member_id, E.member_id_required))
            try:
                subscription = decode_subscription(req.protocols[0][1])
            except MalformedProtocol as e:
                raise KafkaError(E.unknown_server_error, str(e)) from None
            records: list[rec.CoordinatorRecord] = []
            base = self._classic_member_to_update(group, member_id, req, unknown, records)
            updated = replace(
                base,
                instance_id=req.group_instance_id if req.group_instance_id is not None
                else base.instance_id,
                rack_id=subscription.rack_id if subscription.rack_id is not None
                else base.rack_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1 else base.rebalance_timeout_ms,
                subscribed_topic_names=subscription.topics,
                client_id=req.client_id, client_host=req.client_host,
                classic=ClassicMetadata(req.session_timeout_ms, tuple(req.protocols)))
            changed = self._record_member(group, updated, records)
            group = self._stored_group(req.group_id)
            topics = self._topics()
            self._maybe_bump_group_epoch(group, topics, changed, records)
            self._maybe_update_target_assignment(group, topics, now_ms, records)
            member = self._reconcile_member(group, member_id, by_id(subscription.owned, topics),
                                            records)
        except KafkaError as e:
            return CoordinatorResult(response=join_error(req.member_id, e.code))
        self._ctx.cancel(_join_key(req.group_id, member_id))
        self._schedule_session(req.group_id, member_id, req.session_timeout_ms)
        self._schedule_classic_timeout(_sync_key(req.group_id, member_id), req.group_id,
                                       member_id, req.rebalance_timeout_ms, "sync")
        assert member.classic is not None
        return CoordinatorResult(records, {
            "throttle_time": 0, "error_code": E.none, "generation_id": member.member_epoch,
            "protocol_type": PROTOCOL_TYPE, "protocol_name": member.classic.protocol_name,
            "leader": "", "skip_assignment": False, "member_id": member_id, "members": []},
            replay=False)

    def _classic_member_to_update(self, group: ConsumerGroup, member_id: str,
                                  req: JoinRequest, unknown: bool,
                                  records: list[rec.CoordinatorRecord]) -> ConsumerMember:
        """The joining member as the group knows it, or a blank one. A static member with
        a new member id takes over its instance's place whatever protocol that used."""
        if req.group_instance_id is None:
            return group.members.get(member_id) or ConsumerMember(member_id)
        previous_id = group.static_members.get(req.group_instance_id)
        if unknown:
            if previous_id is None:
                return ConsumerMember(member_id)
            records += self._replace_static_consumer(group, group.members[previous_id],
                                                     member_id)
            return group.members[member_id]
        if previous_id is None:
            raise KafkaError(E.unknown_member_id,
                             f"Instance id {req.group_instance_id} is unknown.")
        if previous_id != member_id:
            raise KafkaError(E.fenced_instance_id,
                             f"Static member {member_id} with instance id "
                             f"{req.group_instance_id} was fenced by member {previous_id}.")
        return group.members[member_id]

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, for a request of the classic protocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise KafkaError(E.unknown_member_id, f"Member {member_id} is not a member "
                                 f"of group {group.group_id}.")
        else:
            known = group.static_members.get(instance_id)
            if known is None:
                raise KafkaError(E.unknown_member_id, f"Member with instance id "
                                 f"{instance_id} is not a member of group {group.group_id}.")
            if known != member_id:
                raise KafkaError(E.fenced_instance_id, f"Static member {member_id} with "
                                 f"instance id {instance_id} was fenced by member {known}.")
            member = group.members[known]
        if not member.uses_classic_protocol:
            raise KafkaError(E.unknown_member_id,
                             f"Member {member.member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _check_generation(member: ConsumerMember, generation_id: int) -> None:
        if generation_id != member.member_epoch:
            raise KafkaError(E.illegal_generation,
                             f"The request generation id {generation_id} is not equal to "
                             f"the member epoch {member.member_epoch} of member "
                             f"{member.member_id}.")

    def classic_group_sync(self, now_ms: int, group_id: str, generation_id: int,
                           member_id: str, instance_id: str | None,
                           protocol_type: str | None, protocol_name: str | None
                           ) -> CoordinatorResult[SyncGroupResponse]:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment,
        encoded in the version of its subscription, unless it must rejoin first."""
        try:
            group = self._stored_group(group_id)
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
            assert member.classic is not None
            if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or \
                    (protocol_name is not None and
                     protocol_name != member.classic.protocol_name):
                raise KafkaError(E.inconsistent_group_protocol,
                                 f"The protocol {protocol_type}/{protocol_name} from member "
                                 f"{member_id} is not the one of its join response.")
            if group.group_epoch > member.member_epoch and \
                    member.state is not MemberState.UNREVOKED_PARTITIONS:
                # A newer epoch: rejoin to catch up (a member still revoking finishes first).
                self._schedule_join_timeout(group_id, member)
                raise KafkaError(E.rebalance_in_progress,
                                 f"A new rebalance is triggered in group {group_id} and "
                                 f"member {member_id} should rejoin to catch up.")
            try:
                version = protocol_version(member.classic.protocols[0][1])
            except MalformedProtocol as e:
                raise KafkaError(E.unknown_server_error, str(e)) from None
            assignment = encode_assignment(by_name(member.assigned, self._topics()), version)
        except KafkaError as e:
            return CoordinatorResult(response=sync_response(e.code))
        self._ctx.cancel(_sync_key(group_id, member.member_id))
        self._schedule_session(group_id, member.member_id, member.classic.session_timeout_ms)
        return CoordinatorResult(response={
            "throttle_time": 0, "error_code": E.none, "protocol_type": protocol_type,
            "protocol_name": protocol_name, "assignment": assignment})

    def classic_group_heartbeat(self, now_ms: int, group_id: str, generation_id: int,
                                member_id: str, instance_id: str | None
                                ) -> CoordinatorResult[ErrorCode]:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS whenever a
        JoinGroup would move the member on (a newer group epoch, partitions to revoke, or
        partitions it waits for that are now free)."""
        try:
            group = self._stored_group(group_id)
            member = self._classic_member(group, member_id, instance_id)
            self._check_generation(member, generation_id)
        except KafkaError as e:
            return CoordinatorResult(response=e.code)
        self._schedule_session(group_id, member.member_id,
                               self._session_timeout(group_id, member))
        if member.member_epoch < group.group_epoch or \
                member.state is MemberState.UNREVOKED_PARTITIONS or \
                (member.state is MemberState.UNRELEASED_PARTITIONS and
                 not group.waiting_on_unreleased_partition(member)):
            self._schedule_join_timeout(group_id, member)
            return CoordinatorResult(response=E.rebalance_in_progress)
        return CoordinatorResult(response=E.none)

    def classic_group_leave(self, now_ms: int, group_id: str,
                            members: list[tuple[str, str | None]]
                            ) -> CoordinatorResult[LeaveGroupAnswer]:
        """Kafka's classicGroupLeaveToConsumerGroup: classic members leave (by member id,
        or by instance id as an admin does); one epoch bump for all of them."""
        group = self._stored_group(group_id)
        results: list[LeftMember] = []
        leaving: list[str] = []
        for member_id, instance_id in members:
            try:
                if instance_id is None:
                    member = self._classic_member(group, member_id, None)
                else:
                    known = group.static_members.get(instance_id)
                    if known is None:
                        raise KafkaError(E.unknown_member_id,
                                         f"Instance id {instance_id} is unknown.")
                    # An admin removes a static member by its instance id alone.
                    member = self._classic_member(group, member_id or known, instance_id)
                if member.member_id not in leaving:
                    leaving.append(member.member_id)
                log.info("Member %s has left consumer group %s through an explicit "
                         "LeaveGroup request", member.member_id, group_id)
                results.append(LeftMember(member.member_id, instance_id, E.none))
            except KafkaError as e:
                results.append(LeftMember(member_id, instance_id, e.code))
        records: list[rec.CoordinatorRecord] = []
        for member_id in leaving:
            self._cancel_timers(group_id, member_id)
            tombstones = self._member_tombstones(group_id, member_id)
            self._apply(tombstones)
            records += tombstones
        if leaving:
            records += self._bump_after_removal(group, now_ms)
        return CoordinatorResult(records, LeaveGroupAnswer(E.none, results), replay=False)

    def _schedule_join_timeout(self, group_id: str, member: ConsumerMember) -> None:
        """Told to rejoin, the member has its rebalance timeout to do so (if not already
        counting)."""
        key = _join_key(group_id, member.member_id)
        if not self._ctx.is_scheduled(key):
            self._schedule_classic_timeout(key, group_id, member.member_id,
                                           member.rebalance_timeout_ms, "join")

    def _schedule_classic_timeout(self, key: str, group_id: str, member_id: str,
                                  timeout_ms: int, what: str) -> None:
        def expired(now_ms: int) -> CoordinatorResult:
            group = self._group(group_id)
            if group is None or member_id not in group.members:
                return CoordinatorResult()
            log.info("Member %s of consumer group %s fenced (the classic member failed to "
                     "%s within its rebalance timeout)", member_id, group_id, what)
            return CoordinatorResult(self._fence_records(group, member_id, now_ms),
                                     replay=False)
        self._schedule(key, max(timeout_ms, 0), expired)

    # --- ConsumerGroupDescribe ---------------------------------------------------------------

    def describe_consumer_group(self, group_id: str) -> DescribedConsumerGroup | None:
        group = self._group(group_id)
        if group is None:
            return None
        names = {topic_id: name for name, (topic_id, _) in self._topics().items()}

        def assignment(a: Assignment) -> DescribedAssignment:
            return {"topic_partitions": [
                {"topic_id": tp.topic_id, "topic_name": names.get(tp.topic_id, ""),
                 "partitions": list(tp.partitions)} for tp in to_topic_partitions(a)]}

        return {
            "error_code": E.none, "error_message": None, "group_id": group_id,
            "group_state": group.state.value, "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.preferred_assignor(self._config.assignors[0]),
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": assignment(m.assigned),
                "target_assignment": assignment(group.target.get(m.member_id, {})),
                "member_type": 0 if m.uses_classic_protocol else 1}
                for m in group.members.values()],
            "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    def consumer_target(self, group_id: str, member_id: str) -> Assignment:
        group = self._group(group_id)
        return copy_assignment(group.target.get(member_id, {})) if group else {}

    # --- what offsets and group deletion ask of a consumer group ---------------------------

    def validate_offset_commit(self, group: ConsumerGroup, generation_id: int,
                               member_id: str, version: int) -> ErrorCode | None:
        """The generation of a commit is the member's epoch."""
        if generation_id < 0 and not group.members:
            return None  # an admin commit to an empty group
        consumer = group.members.get(member_id)
        if consumer is None:
            return E.unknown_member_id
        if generation_id != consumer.member_epoch:
            if consumer.uses_classic_protocol or version < MEMBER_EPOCH_COMMIT_VERSION:
                return E.illegal_generation
            return E.stale_member_epoch
        return None

    def validate_offset_fetch(self, group: ConsumerGroup, member_id: str | None,
                              member_epoch: int) -> None:
        """Only a member that names itself (OffsetFetch v9) is checked; admins are not."""
        if not member_id or member_epoch < 0:
            return
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(E.unknown_member_id, f"Member {member_id} is unknown.")
        if member.member_epoch != member_epoch:
            if member.uses_classic_protocol:
                raise KafkaError(E.illegal_generation, f"The received generation id "
                                 f"{member_epoch} does not match the expected member epoch "
                                 f"{member.member_epoch}.")
            raise KafkaError(E.stale_member_epoch,
                             f"The member epoch {member_epoch} is stale.")

    def is_subscribed_to_topic(self, group: ConsumerGroup, topic: str) -> bool:
        return topic in self._subscribed_names(group, self._topics())

    def offset_expiration(self, group: ConsumerGroup) -> OffsetExpiration:
        return OffsetExpiration(not group.members, group.state_timestamp_ms,
                                self._subscribed_names(group, self._topics()))

    def is_empty(self, group: ConsumerGroup) -> bool:
        return not group.members

    def tombstones(self, group: ConsumerGroup) -> list[rec.CoordinatorRecord]:
        return [rec.CoordinatorRecord(rec.ConsumerGroupTargetAssignmentMetadataKey(
                    group_id=group.group_id), None),
                rec.CoordinatorRecord(rec.ConsumerGroupMetadataKey(
                    group_id=group.group_id), None)]
