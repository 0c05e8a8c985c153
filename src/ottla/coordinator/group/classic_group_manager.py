"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on one shard:
the rebalance barrier, member sessions and the classic groups' records (Kafka's
GroupMetadataManager, its classic half).

As in Kafka, classic-group records are written without being replayed: the handlers change
the in-memory group themselves, and ``replay`` rebuilds it on load. Requests wait in the
group (JoinGroup until the barrier closes, SyncGroup until the leader's assignment) as
reply callbacks, answered later through ``ctx.respond``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from ottla.coordinator.group.config import GroupConfig
from ottla.coordinator.group.consumer_protocol import PROTOCOL_TYPE
from ottla.coordinator.group.coordinator_metrics import GroupCoordinatorMetrics
from ottla.coordinator.group.group_store import GroupStore
from ottla.coordinator.group.offset_metadata_manager import OffsetExpiration
from ottla.coordinator.group.responses import (
    DescribedGroup,
    DescribedGroupMember,
    JoinGroupMember,
    JoinGroupResponse,
    LeaveGroupAnswer,
    LeftMember,
    SyncGroupResponse,
)
from ottla.coordinator.runtime import DEFERRED, CoordinatorResult, Reply, ShardContext
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicState
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
MEMBER_ID_REQUIRED_VERSION = 4
"""JoinGroup v4+ (KIP-394): a new dynamic member is given its id with MEMBER_ID_REQUIRED
and joins again with it."""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    version: int


def join_error(member_id: str, error: ErrorCode) -> JoinGroupResponse:
    return {"throttle_time": 0, "error_code": error, "generation_id": -1,
            "protocol_type": None, "protocol_name": None, "leader": "",
            "skip_assignment": False, "member_id": member_id, "members": []}


def sync_response(error: ErrorCode, group: ClassicGroup | None = None,
                   assignment: bytes = b"") -> SyncGroupResponse:
    return {"throttle_time": 0, "error_code": error,
            "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol_name if group else None,
            "assignment": assignment}


def _heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat/{group_id}/{member_id}"


def _join_key(group_id: str) -> str:
    return f"join/{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync/{group_id}"


def _pending_key(group_id: str, member_id: str) -> str:
    return f"pending/{group_id}/{member_id}"


class ClassicGroupManager:
    RECORD_KEYS: ClassVar[tuple[type, ...]] = (rec.GroupMetadataKey,)

    def __init__(self, ctx: ShardContext, config: GroupConfig, groups: GroupStore,
                 new_member_id: Callable[[str], str] | None = None,
                 metrics: GroupCoordinatorMetrics | None = None) -> None:
        self._ctx = ctx
        self._metrics = metrics
        self._config = config
        self._groups = groups
        self._new_member_id = new_member_id or (lambda client_id: f"{client_id}-{uuid.uuid4()}")

    def _schedule(self, key: str, delay_ms: int,
                  operation: Callable[[int], CoordinatorResult]) -> None:
        """A timer calls back into this manager, not through the shard the runtime passes:
        the manager lives exactly as long as its shard's timers (unloading drops both)."""
        self._ctx.schedule(key, delay_ms, lambda _shard, now: operation(now))

    # --- replay and loading ----------------------------------------------------------------

    def replay(self, record: rec.CoordinatorRecord) -> None:
        key: rec.GroupMetadataKey = record.key
        value: rec.GroupMetadataValue | None = record.value
        if value is None:
            if self._groups.classic(key.group) is not None:
                self._groups.remove(key.group)
        else:
            self._groups.put(ClassicGroup.from_record(key.group, value))

    def create_simple_group(self, group_id: str) -> None:
        """A group known only by its committed offsets: no members, never rebalanced."""
        self._groups.put(ClassicGroup(group_id))

    def on_loaded(self, now_ms: int) -> None:
        for group in self._groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def on_unloaded(self) -> None:
        for group in self._groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                for reply in (member.join_reply, member.sync_reply):
                    if reply is not None:
                        reply(KafkaError(E.not_coordinator, "The coordinator moved"))

    # --- JoinGroup -----------------------------------------------------------------------

    def validate_join(self, req: JoinRequest) -> ErrorCode | None:
        """What Kafka checks before a JoinGroup reaches a group of either kind."""
        if not req.group_id:
            return E.invalid_group_id
        if not (self._config.min_session_timeout_ms <= req.session_timeout_ms
                <= self._config.max_session_timeout_ms):
            return E.invalid_session_timeout
        return None

    def join_group(self, now_ms: int, req: JoinRequest, reply: Reply
                   ) -> CoordinatorResult[JoinGroupResponse]:
        """A JoinGroup to a classic group, or to no group (the GroupMetadataManager sends
        the ones for consumer groups elsewhere)."""
        error = self.validate_join(req)
        if error is not None:
            return CoordinatorResult(response=join_error(req.member_id, error))
        group = self._groups.classic(req.group_id)
        if group is None:
            if req.member_id:
                return CoordinatorResult(response=join_error(req.member_id,
                                                              E.unknown_member_id))
            group = ClassicGroup(req.group_id, current_state_timestamp=now_ms)
            self._groups.put(group)
        if group.is_in(S.DEAD):
            return CoordinatorResult(response=join_error(req.member_id,
                                                          E.coordinator_not_available))
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return CoordinatorResult(response=join_error(req.member_id,
                                                          E.inconsistent_group_protocol))
        if not req.member_id:
            return self._join_new_member(now_ms, group, req, reply)
        return self._join_existing_member(now_ms, group, req, reply)

    def _join_new_member(self, now_ms: int, group: ClassicGroup, req: JoinRequest,
                         reply: Reply) -> CoordinatorResult:
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                return self._replace_static_member(now_ms, group, existing, req, reply)
        if len(group.members) + len(group.pending_members) >= self._config.max_size:
            return CoordinatorResult(response=join_error("", E.group_max_size_reached))
        member_id = self._new_member_id(req.client_id)
        if req.group_instance_id is None and req.version >= MEMBER_ID_REQUIRED_VERSION:
            # KIP-394: the member must come back with the id, so that a join whose response
            # is lost does not leave an unknown member behind.
            group.pending_members.add(member_id)
            self._schedule(_pending_key(group.group_id, member_id), req.session_timeout_ms,
                           lambda now: self._expire_pending(now, group.group_id, member_id))
            return CoordinatorResult(response=join_error(member_id, E.member_id_required))
        return self._add_member_and_rebalance(now_ms, group, member_id, req, reply)

    def _join_existing_member(self, now_ms: int, group: ClassicGroup, req: JoinRequest,
                              reply: Reply) -> CoordinatorResult:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._ctx.cancel(_pending_key(group.group_id, member_id))
            return self._add_member_and_rebalance(now_ms, group, member_id, req, reply)
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not None:
            return CoordinatorResult(response=join_error(member_id, error))
        member = group.members[member_id]
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member(member, req, reply)
            return CoordinatorResult(self._maybe_complete_join(now_ms, group), DEFERRED,
                                     replay=False)
        if group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # The member lost its join response: send it again.
                return CoordinatorResult(response=self._join_response(group, member))
            self._update_member(member, req, reply)
            return CoordinatorResult(self._prepare_rebalance(now_ms, group), DEFERRED,
                                     replay=False)
        if group.is_in(S.STABLE):
            if member_id == group.leader_id or not member.matches(req.protocols):
                self._update_member(member, req, reply)
                return CoordinatorResult(self._prepare_rebalance(now_ms, group), DEFERRED,
                                         replay=False)
            return CoordinatorResult(response=self._join_response(group, member,
                                                                  with_members=False))
        return CoordinatorResult(response=join_error(member_id, E.unknown_member_id))

    def _replace_static_member(self, now_ms: int, group: ClassicGroup, old_id: str,
                               req: JoinRequest, reply: Reply) -> CoordinatorResult:
        """KIP-345: a static member that restarts takes over its old identity under a new
        member id; a stable group keeps its assignment without a rebalance."""
        old = group.members[old_id]
        self._fence(old, E.fenced_instance_id)
        self._ctx.cancel(_heartbeat_key(group.group_id, old_id))
        new_id = self._new_member_id(req.client_id)
        was_leader = group.leader_id == old_id
        group.remove(old_id)
        member = ClassicMember(new_id, req.group_instance_id, req.client_id, req.client_host,
                               req.rebalance_timeout_ms, req.session_timeout_ms,
                               req.protocol_type, list(req.protocols), old.assignment)
        group.add(member)
        if was_leader:
            group.leader_id = new_id
        if group.is_in(S.STABLE) and old.matches(req.protocols):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            response = self._join_response(group, member, with_members=was_leader)
            if was_leader:
                response["skip_assignment"] = True
            return CoordinatorResult([group.to_record(now_ms)], response, replay=False)
        member.join_reply, member.join_version = reply, req.version
        if group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult(self._maybe_complete_join(now_ms, group), DEFERRED,
                                     replay=False)
        return CoordinatorResult(self._prepare_rebalance(now_ms, group), DEFERRED,
                                 replay=False)

    def _add_member_and_rebalance(self, now_ms: int, group: ClassicGroup, member_id: str,
                                  req: JoinRequest, reply: Reply) -> CoordinatorResult:
        member = ClassicMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                               req.rebalance_timeout_ms, req.session_timeout_ms,
                               req.protocol_type, list(req.protocols), join_reply=reply,
                               join_version=req.version, is_new=True)
        group.add(member)
        group.new_member_added = True
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if group.is_in(S.PREPARING_REBALANCE):
            records = self._maybe_complete_join(now_ms, group)
        else:
            records = self._prepare_rebalance(now_ms, group)
        return CoordinatorResult(records, DEFERRED, replay=False)

    def _update_member(self, member: ClassicMember, req: JoinRequest, reply: Reply) -> None:
        if member.join_reply is not None and member.join_reply is not reply:
            self._ctx.respond(member.join_reply, join_error(member.member_id,
                                                             E.rebalance_in_progress))
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.join_reply, member.join_version = reply, req.version

    def _validate_member(self, group: ClassicGroup, member_id: str,
                         instance_id: str | None) -> ErrorCode | None:
        if instance_id is not None:
            known = group.static_member_id(instance_id)
            if known is not None and known != member_id:
                return E.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return E.unknown_member_id
        if member.group_instance_id is not None and member.group_instance_id != instance_id:
            return E.fenced_instance_id
        return None

    def _join_response(self, group: ClassicGroup, member: ClassicMember,
                       with_members: bool | None = None) -> JoinGroupResponse:
        leader = member.member_id == group.leader_id
        members: list[JoinGroupMember] = []
        if with_members if with_members is not None else leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol_name or "")}
                       for m in group.members.values()]
        return {"throttle_time": 0, "error_code": E.none, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id or "", "skip_assignment": False,
                "member_id": member.member_id, "members": members}

    # --- the rebalance barrier -----------------------------------------------------------

    def _prepare_rebalance(self, now_ms: int, group: ClassicGroup) -> list[rec.CoordinatorRecord]:
        if group.is_in(S.PREPARING_REBALANCE):
            return self._maybe_complete_join(now_ms, group)
        if group.is_in(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                if member.sync_reply is not None:
                    self._ctx.respond(member.sync_reply, sync_response(E.rebalance_in_progress))
                    member.sync_reply = None
            self._ctx.cancel(_sync_key(group.group_id))
        was_empty = group.is_in(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now_ms)
        group_id = group.group_id
        rebalance_ms = group.max_rebalance_timeout_ms()
        if was_empty:
            delay = min(self._config.initial_rebalance_delay_ms, rebalance_ms)
            group.new_member_added = False
            self._schedule(_join_key(group_id), delay,
                           lambda now: self._initial_join_expired(
                               now, group_id, delay, rebalance_ms - delay))
            return []
        self._schedule(_join_key(group_id), rebalance_ms,
                       lambda now: self._join_expired(now, group_id))
        return self._maybe_complete_join(now_ms, group)

    def _initial_join_expired(self, now_ms: int, group_id: str, delay: int,
                              remaining: int) -> CoordinatorResult:
        """group.initial.rebalance.delay.ms: wait while new members keep arriving, up to
        the rebalance timeout."""
        group = self._groups.classic(group_id)
        if group is None or not group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult()
        if group.new_member_added and remaining > 0 and delay > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            self._schedule(_join_key(group_id), step,
                           lambda now: self._initial_join_expired(
                               now, group_id, delay, remaining - step))
            return CoordinatorResult()
        return CoordinatorResult(self._complete_join(now_ms, group), replay=False)

    def _join_expired(self, now_ms: int, group_id: str) -> CoordinatorResult:
        group = self._groups.classic(group_id)
        if group is None or not group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult()
        return CoordinatorResult(self._complete_join(now_ms, group), replay=False)

    def _maybe_complete_join(self, now_ms: int, group: ClassicGroup) -> list[rec.CoordinatorRecord]:
        """Close the barrier once everyone has joined; a group's first rebalance (from
        EMPTY) always waits for its (initial) join timer instead."""
        if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined() and \
                group.previous_state is not S.EMPTY:
            return self._complete_join(now_ms, group)
        return []

    def _complete_join(self, now_ms: int, group: ClassicGroup) -> list[rec.CoordinatorRecord]:
        self._ctx.cancel(_join_key(group.group_id))
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            self._remove_member(group, member.member_id, E.unknown_member_id)
        group.init_next_generation(now_ms)
        if group.is_in(S.EMPTY):
            return [group.to_record(now_ms)]
        for member in group.members.values():
            self._ctx.respond(member.join_reply, self._join_response(group, member))
            member.join_reply = None
            member.is_new = False
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        group_id, generation = group.group_id, group.generation_id
        self._schedule(_sync_key(group_id), group.max_rebalance_timeout_ms(),
                       lambda now: self._sync_expired(now, group_id, generation))
        return []

    def _sync_expired(self, now_ms: int, group_id: str, generation: int) -> CoordinatorResult:
        """The leader's assignment did not arrive within the rebalance timeout: drop the
        members that never synced and start over."""
        group = self._groups.classic(group_id)
        if group is None or group.generation_id != generation or \
                not group.is_in(S.COMPLETING_REBALANCE):
            return CoordinatorResult()
        for member in [m for m in group.members.values() if m.sync_reply is None]:
            self._remove_member(group, member.member_id, E.unknown_member_id)
        return CoordinatorResult(self._prepare_rebalance(now_ms, group), replay=False)

    # --- SyncGroup -------------------------------------------------------------------------

    def sync_group(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes],
                   reply: Reply) -> CoordinatorResult[SyncGroupResponse]:
        group = self._groups.classic(group_id)
        if group is None or group.is_in(S.DEAD):
            return CoordinatorResult(response=sync_response(E.unknown_member_id))
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return CoordinatorResult(response=sync_response(error))
        if generation_id != group.generation_id:
            return CoordinatorResult(response=sync_response(E.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return CoordinatorResult(response=sync_response(E.inconsistent_group_protocol))
        if group.is_in(S.EMPTY):
            return CoordinatorResult(response=sync_response(E.unknown_member_id))
        if group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult(response=sync_response(E.rebalance_in_progress))
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(S.STABLE):
            return CoordinatorResult(response=sync_response(E.none, group, member.assignment))
        member.sync_reply = reply
        if member_id != group.leader_id:
            return CoordinatorResult(response=DEFERRED)
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        record = group.to_record(now_ms)
        group.transition(S.STABLE, now_ms)
        if self._metrics is not None:
            self._metrics.classic_completed_rebalances += 1
        self._ctx.cancel(_sync_key(group_id))
        for m in group.members.values():
            if m.sync_reply is not None:
                self._ctx.respond(m.sync_reply, sync_response(E.none, group, m.assignment))
                m.sync_reply = None
        return CoordinatorResult([record], DEFERRED, replay=False)

    # --- Heartbeat and liveness --------------------------------------------------------------

    def heartbeat(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> CoordinatorResult[ErrorCode]:
        group = self._groups.classic(group_id)
        if group is None or group.is_in(S.EMPTY):
            return CoordinatorResult(response=E.unknown_member_id)
        if group.is_in(S.DEAD):
            return CoordinatorResult(response=E.coordinator_not_available)
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return CoordinatorResult(response=error)
        if generation_id != group.generation_id:
            return CoordinatorResult(response=E.illegal_generation)
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult(response=E.rebalance_in_progress)
        return CoordinatorResult(response=E.none)

    def _schedule_heartbeat(self, group: ClassicGroup, member: ClassicMember,
                            timeout_ms: int) -> None:
        group_id, member_id = group.group_id, member.member_id
        self._schedule(_heartbeat_key(group_id, member_id), timeout_ms,
                       lambda now: self._session_expired(now, group_id, member_id))

    def _session_expired(self, now_ms: int, group_id: str, member_id: str) -> CoordinatorResult:
        group = self._groups.classic(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult()
        log.info("Member %s of group %s has failed (session timeout)", member_id, group_id)
        self._remove_member(group, member_id, E.unknown_member_id)
        return CoordinatorResult(self._after_removal(now_ms, group), replay=False)

    def _expire_pending(self, now_ms: int, group_id: str, member_id: str) -> CoordinatorResult:
        group = self._groups.classic(group_id)
        if group is not None and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            return CoordinatorResult(self._maybe_complete_join(now_ms, group), replay=False)
        return CoordinatorResult()

    def _fence(self, member: ClassicMember, error: ErrorCode) -> None:
        if member.join_reply is not None:
            self._ctx.respond(member.join_reply, join_error(member.member_id, error))
            member.join_reply = None
        if member.sync_reply is not None:
            self._ctx.respond(member.sync_reply, sync_response(error))
            member.sync_reply = None

    def _remove_member(self, group: ClassicGroup, member_id: str, error: ErrorCode) -> None:
        member = group.remove(member_id)
        if member is not None:
            self._fence(member, error)
            self._ctx.cancel(_heartbeat_key(group.group_id, member_id))

    def _after_removal(self, now_ms: int, group: ClassicGroup) -> list[rec.CoordinatorRecord]:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(now_ms, group)
        if group.is_in(S.PREPARING_REBALANCE):
            return self._maybe_complete_join(now_ms, group)
        return []

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, now_ms: int, group_id: str, members: list[tuple[str, str | None]]
                    ) -> CoordinatorResult[LeaveGroupAnswer]:
        group = self._groups.classic(group_id)
        if group is None or group.is_in(S.DEAD):
            return CoordinatorResult(response=LeaveGroupAnswer(E.unknown_member_id, []))
        results: list[LeftMember] = []
        removed = False
        for member_id, instance_id in members:
            error = E.none
            if instance_id is not None:
                known = group.static_member_id(instance_id)
                if known is None:
                    error = E.unknown_member_id
                elif member_id and member_id != known:
                    error = E.fenced_instance_id
                else:
                    self._remove_member(group, known, E.unknown_member_id)
                    removed = True
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._ctx.cancel(_pending_key(group_id, member_id))
                removed = True
            elif member_id in group.members:
                self._remove_member(group, member_id, E.unknown_member_id)
                removed = True
            else:
                error = E.unknown_member_id
            results.append(LeftMember(member_id, instance_id, error))
        records = self._after_removal(now_ms, group) if removed else []
        return CoordinatorResult(records, LeaveGroupAnswer(E.none, results), replay=False)

    # --- online migration between the group protocols --------------------------------------

    def release_upgraded(self, group: ClassicGroup) -> None:
        """The group became a consumer group: members waiting in a join or a sync are told
        to rejoin (as Kafka does), and the classic timers go."""
        for member in group.members.values():
            if member.join_reply is not None:
                self._ctx.respond(member.join_reply,
                                  join_error(member.member_id, E.rebalance_in_progress))
                member.join_reply = None
            if member.sync_reply is not None:
                self._ctx.respond(member.sync_reply, sync_response(E.rebalance_in_progress))
                member.sync_reply = None
            self._ctx.cancel(_heartbeat_key(group.group_id, member.member_id))
        for member_id in group.pending_members:
            self._ctx.cancel(_pending_key(group.group_id, member_id))
        self._ctx.cancel(_join_key(group.group_id))
        self._ctx.cancel(_sync_key(group.group_id))

    def adopt_downgraded(self, group: ClassicGroup, now_ms: int) -> list[rec.CoordinatorRecord]:
        """A consumer group became this classic group: its members get classic sessions and
        a rebalance starts, which they learn of from their next heartbeat."""
        self._groups.put(group)
        for member in group.members.values():
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return self._prepare_rebalance(now_ms, group)

    # --- DescribeGroups ---------------------------------------------------------------------

    def describe_group(self, group_id: str) -> DescribedGroup | None:
        group = self._groups.classic(group_id)
        if group is None:
            return None
        stable = group.is_in(S.STABLE)
        members: list[DescribedGroupMember] = []
        for m in group.members.values():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name)
                if stable and group.protocol_name else b"",
                "member_assignment": m.assignment if stable else b""})
        return {"error_code": E.none, "group_id": group_id, "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": (group.protocol_name or "") if stable else "",
                "members": members if not group.is_in(S.DEAD) else []}

    # --- what offsets and group deletion ask of a classic group ----------------------------

    def validate_offset_commit(self, group: ClassicGroup, generation_id: int, member_id: str,
                               instance_id: str | None) -> ErrorCode | None:
        if group.is_in(S.DEAD):
            return E.coordinator_not_available
        if generation_id < 0 and group.is_in(S.EMPTY):
            return None
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return E.illegal_generation
        if group.is_in(S.COMPLETING_REBALANCE):
            return E.rebalance_in_progress
        return None

    def offsets_committed(self, group: ClassicGroup, member_id: str) -> None:
        """A member's commit keeps its session alive, as a heartbeat does."""
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def validate_offset_delete(self, group: ClassicGroup) -> ErrorCode | None:
        """Only the consumer protocol tells which topics a group uses (the subscription
        check follows); any other group must be empty first."""
        if not group.is_in(S.EMPTY) and group.protocol_type != PROTOCOL_TYPE:
            return E.non_empty_group
        return None

    def offset_expiration(self, group: ClassicGroup) -> OffsetExpiration:
        subscribed = group.subscribed_topics if group.protocol_type == PROTOCOL_TYPE else None
        return OffsetExpiration(group.is_in(S.EMPTY), group.current_state_timestamp,
                                subscribed)

    def is_empty(self, group: ClassicGroup) -> bool:
        return group.is_in(S.EMPTY)

    def tombstones(self, group: ClassicGroup) -> list[rec.CoordinatorRecord]:
        return [rec.CoordinatorRecord(rec.GroupMetadataKey(group=group.group_id), None)]
