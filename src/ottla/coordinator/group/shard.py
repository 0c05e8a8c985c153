"""The group coordinator shard: the groups and offsets of one ``__consumer_offsets``
partition (Kafka's GroupCoordinatorShard with its GroupMetadataManager and
OffsetMetadataManager, seed 000).

Sans-I/O: every handler takes ``now_ms``, returns a CoordinatorResult (records and a
response), and parks requests (JoinGroup until the barrier closes, SyncGroup until the
leader's assignment) by keeping their reply callbacks, answered later through
``ctx.respond``. As in Kafka, classic-group records are written without being replayed:
the handlers change the in-memory group themselves, and ``replay`` rebuilds it on load.
Offset and deletion records go through ``replay`` in both cases.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import ClassicGroup, ClassicMember, ClassicState
from ottla.coordinator.group.consumer_group import ConsumerGroup
from ottla.coordinator.group.consumer_protocol import (
    ConsumerGroupConfig,
    ConsumerGroupHandlers,
    TopicsView,
)
from ottla.coordinator.group.offsets import Offsets, commit_record, tombstone
from ottla.coordinator.runtime import DEFERRED, CoordinatorResult, Reply, ShardContext
from ottla.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

E = ErrorCode
S = ClassicState
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The ``group.*`` and ``offset*`` broker configs the shard obeys (Kafka's defaults)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000

    @classmethod
    def from_config(cls, config: Any) -> GroupConfig:
        return cls(config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"],
                   config["group.initial.rebalance.delay.ms"], config["group.max.size"],
                   config["offset.metadata.max.bytes"],
                   config["offsets.retention.minutes"] * 60_000,
                   config["offsets.retention.check.interval.ms"])


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


def _join_error(member_id: str, error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": error, "generation_id": -1,
            "protocol_type": None, "protocol_name": None, "leader": "",
            "skip_assignment": False, "member_id": member_id, "members": []}


def _sync_response(error: ErrorCode, group: ClassicGroup | None = None,
                   assignment: bytes = b"") -> dict[str, Any]:
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


EXPIRE_OFFSETS_KEY = "expire-offsets"


class GroupCoordinatorShard(ConsumerGroupHandlers):
    def __init__(self, ctx: ShardContext, config: GroupConfig,
                 new_member_id: Callable[[str], str] | None = None,
                 topics: TopicsView | None = None,
                 consumer_config: ConsumerGroupConfig | None = None) -> None:
        self.ctx = ctx
        self.config = config
        self.consumer_config = consumer_config or ConsumerGroupConfig()
        self.topics = topics or dict
        self.groups: dict[str, ClassicGroup | ConsumerGroup] = {}
        self.offsets = Offsets()
        self.new_member_id = new_member_id or (lambda client_id: f"{client_id}-{uuid.uuid4()}")

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    # --- replay: the one path from records to state --------------------------------------

    def replay(self, offset: int, record: rec.CoordinatorRecord) -> None:
        key, value = record.key, record.value
        if isinstance(key, rec.OffsetCommitKey):
            if value is not None and key.group not in self.groups:
                self.groups[key.group] = ClassicGroup(key.group)  # a simple (member-less) group
            self.offsets.replay(key, value)
        elif isinstance(key, rec.GroupMetadataKey):
            if value is None:
                if self._classic(key.group) is not None:
                    del self.groups[key.group]
            else:
                self.groups[key.group] = ClassicGroup.from_record(key.group, value)
        else:
            self.replay_consumer(key, value)

    def on_loaded(self, now_ms: int) -> None:
        for group in self.groups.values():
            if isinstance(group, ClassicGroup):
                for member in group.members.values():
                    self._schedule_heartbeat(group, member, member.session_timeout_ms)
        self.consumer_groups_loaded()
        self.ctx.schedule(EXPIRE_OFFSETS_KEY, self.config.offsets_retention_check_interval_ms,
                          lambda shard, now: shard.expire_offsets(now))

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                for reply in (member.join_reply, member.sync_reply):
                    if reply is not None:
                        reply(KafkaError(E.not_coordinator, "The coordinator moved"))

    # --- JoinGroup -----------------------------------------------------------------------

    def join_group(self, now_ms: int, req: JoinRequest, reply: Reply) -> CoordinatorResult:
        if not req.group_id:
            return CoordinatorResult(response=_join_error(req.member_id, E.invalid_group_id))
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return CoordinatorResult(response=_join_error(req.member_id,
                                                          E.invalid_session_timeout))
        existing = self.groups.get(req.group_id)
        if isinstance(existing, ConsumerGroup):
            # Classic members inside a consumer group (migration) are not served yet.
            return CoordinatorResult(response=_join_error(req.member_id,
                                                          E.inconsistent_group_protocol))
        group = existing
        if group is None:
            if req.member_id:
                return CoordinatorResult(response=_join_error(req.member_id,
                                                              E.unknown_member_id))
            group = self.groups[req.group_id] = ClassicGroup(req.group_id,
                                                             current_state_timestamp=now_ms)
        if group.is_in(S.DEAD):
            return CoordinatorResult(response=_join_error(req.member_id,
                                                          E.coordinator_not_available))
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return CoordinatorResult(response=_join_error(req.member_id,
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
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return CoordinatorResult(response=_join_error("", E.group_max_size_reached))
        member_id = self.new_member_id(req.client_id)
        if req.group_instance_id is None and req.version >= 4:
            # KIP-394: the member must come back with the id, so that a join whose response
            # is lost does not leave an unknown member behind.
            group.pending_members.add(member_id)
            self.ctx.schedule(_pending_key(group.group_id, member_id), req.session_timeout_ms,
                              lambda shard, now: shard._expire_pending(now, group.group_id,
                                                                       member_id))
            return CoordinatorResult(response=_join_error(member_id, E.member_id_required))
        return self._add_member_and_rebalance(now_ms, group, member_id, req, reply)

    def _join_existing_member(self, now_ms: int, group: ClassicGroup, req: JoinRequest,
                              reply: Reply) -> CoordinatorResult:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.ctx.cancel(_pending_key(group.group_id, member_id))
            return self._add_member_and_rebalance(now_ms, group, member_id, req, reply)
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error is not None:
            return CoordinatorResult(response=_join_error(member_id, error))
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
        return CoordinatorResult(response=_join_error(member_id, E.unknown_member_id))

    def _replace_static_member(self, now_ms: int, group: ClassicGroup, old_id: str,
                               req: JoinRequest, reply: Reply) -> CoordinatorResult:
        """KIP-345: a static member that restarts takes over its old identity under a new
        member id; a stable group keeps its assignment without a rebalance."""
        old = group.members[old_id]
        self._fence(old, E.fenced_instance_id)
        self.ctx.cancel(_heartbeat_key(group.group_id, old_id))
        new_id = self.new_member_id(req.client_id)
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
            self.ctx.respond(member.join_reply, _join_error(member.member_id,
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
                       with_members: bool | None = None) -> dict[str, Any]:
        leader = member.member_id == group.leader_id
        members = []
        if with_members if with_members is not None else leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata(group.protocol_name or "")}
                       for m in group.members.values()]
        return {"throttle_time": 0, "error_code": E.none, "generation_id": group.generation_id,
                "protocol_type": group.protocol_type, "protocol_name": group.protocol_name,
                "leader": group.leader_id or "", "skip_assignment": False,
                "member_id": member.member_id, "members": members}

    # --- the rebalance barrier -----------------------------------------------------------

    def _prepare_rebalance(self, now_ms: int, group: ClassicGroup) -> list[Any]:
        if group.is_in(S.PREPARING_REBALANCE):
            return self._maybe_complete_join(now_ms, group)
        if group.is_in(S.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                if member.sync_reply is not None:
                    self.ctx.respond(member.sync_reply, _sync_response(E.rebalance_in_progress))
                    member.sync_reply = None
            self.ctx.cancel(_sync_key(group.group_id))
        was_empty = group.is_in(S.EMPTY)
        group.transition(S.PREPARING_REBALANCE, now_ms)
        group_id = group.group_id
        rebalance_ms = group.max_rebalance_timeout_ms()
        if was_empty:
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            group.new_member_added = False
            self.ctx.schedule(_join_key(group_id), delay,
                              lambda shard, now: shard._initial_join_expired(
                                  now, group_id, delay, rebalance_ms - delay))
            return []
        self.ctx.schedule(_join_key(group_id), rebalance_ms,
                          lambda shard, now: shard._join_expired(now, group_id))
        return self._maybe_complete_join(now_ms, group)

    def _initial_join_expired(self, now_ms: int, group_id: str, delay: int,
                              remaining: int) -> CoordinatorResult:
        """group.initial.rebalance.delay.ms: wait while new members keep arriving, up to
        the rebalance timeout."""
        group = self._classic(group_id)
        if group is None or not group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult()
        if group.new_member_added and remaining > 0 and delay > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            self.ctx.schedule(_join_key(group_id), step,
                              lambda shard, now: shard._initial_join_expired(
                                  now, group_id, delay, remaining - step))
            return CoordinatorResult()
        return CoordinatorResult(self._complete_join(now_ms, group), replay=False)

    def _join_expired(self, now_ms: int, group_id: str) -> CoordinatorResult:
        group = self._classic(group_id)
        if group is None or not group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult()
        return CoordinatorResult(self._complete_join(now_ms, group), replay=False)

    def _maybe_complete_join(self, now_ms: int, group: ClassicGroup) -> list[Any]:
        """Close the barrier once everyone has joined; a group's first rebalance (from
        EMPTY) always waits for its (initial) join timer instead."""
        if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined() and \
                group.previous_state is not S.EMPTY:
            return self._complete_join(now_ms, group)
        return []

    def _complete_join(self, now_ms: int, group: ClassicGroup) -> list[Any]:
        self.ctx.cancel(_join_key(group.group_id))
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            self._remove_member(group, member.member_id, E.unknown_member_id)
        group.init_next_generation(now_ms)
        if group.is_in(S.EMPTY):
            return [group.to_record(now_ms)]
        for member in group.members.values():
            self.ctx.respond(member.join_reply, self._join_response(group, member))
            member.join_reply = None
            member.is_new = False
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        group_id, generation = group.group_id, group.generation_id
        self.ctx.schedule(_sync_key(group_id), group.max_rebalance_timeout_ms(),
                          lambda shard, now: shard._sync_expired(now, group_id, generation))
        return []

    def _sync_expired(self, now_ms: int, group_id: str, generation: int) -> CoordinatorResult:
        """The leader's assignment did not arrive within the rebalance timeout: drop the
        members that never synced and start over."""
        group = self._classic(group_id)
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
                   reply: Reply) -> CoordinatorResult:
        group = self._classic(group_id)
        if group is None or group.is_in(S.DEAD):
            return CoordinatorResult(response=_sync_response(E.unknown_member_id))
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return CoordinatorResult(response=_sync_response(error))
        if generation_id != group.generation_id:
            return CoordinatorResult(response=_sync_response(E.illegal_generation))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return CoordinatorResult(response=_sync_response(E.inconsistent_group_protocol))
        if group.is_in(S.EMPTY):
            return CoordinatorResult(response=_sync_response(E.unknown_member_id))
        if group.is_in(S.PREPARING_REBALANCE):
            return CoordinatorResult(response=_sync_response(E.rebalance_in_progress))
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(S.STABLE):
            return CoordinatorResult(response=_sync_response(E.none, group, member.assignment))
        member.sync_reply = reply
        if member_id != group.leader_id:
            return CoordinatorResult(response=DEFERRED)
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        record = group.to_record(now_ms)
        group.transition(S.STABLE, now_ms)
        self.ctx.cancel(_sync_key(group_id))
        for m in group.members.values():
            if m.sync_reply is not None:
                self.ctx.respond(m.sync_reply, _sync_response(E.none, group, m.assignment))
                m.sync_reply = None
        return CoordinatorResult([record], DEFERRED, replay=False)

    # --- Heartbeat and liveness --------------------------------------------------------------

    def heartbeat(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> CoordinatorResult:
        group = self._classic(group_id)
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
        self.ctx.schedule(_heartbeat_key(group_id, member_id), timeout_ms,
                          lambda shard, now: shard._session_expired(now, group_id, member_id))

    def _session_expired(self, now_ms: int, group_id: str, member_id: str) -> CoordinatorResult:
        group = self._classic(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult()
        log.info("Member %s of group %s has failed (session timeout)", member_id, group_id)
        self._remove_member(group, member_id, E.unknown_member_id)
        return CoordinatorResult(self._after_removal(now_ms, group), replay=False)

    def _expire_pending(self, now_ms: int, group_id: str, member_id: str) -> CoordinatorResult:
        group = self._classic(group_id)
        if group is not None and member_id in group.pending_members:
            group.pending_members.discard(member_id)
            return CoordinatorResult(self._maybe_complete_join(now_ms, group), replay=False)
        return CoordinatorResult()

    def _fence(self, member: ClassicMember, error: ErrorCode) -> None:
        if member.join_reply is not None:
            self.ctx.respond(member.join_reply, _join_error(member.member_id, error))
            member.join_reply = None
        if member.sync_reply is not None:
            self.ctx.respond(member.sync_reply, _sync_response(error))
            member.sync_reply = None

    def _remove_member(self, group: ClassicGroup, member_id: str, error: ErrorCode) -> None:
        member = group.remove(member_id)
        if member is not None:
            self._fence(member, error)
            self.ctx.cancel(_heartbeat_key(group.group_id, member_id))

    def _after_removal(self, now_ms: int, group: ClassicGroup) -> list[Any]:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            return self._prepare_rebalance(now_ms, group)
        if group.is_in(S.PREPARING_REBALANCE):
            return self._maybe_complete_join(now_ms, group)
        return []

    # --- LeaveGroup ------------------------------------------------------------------------

    def leave_group(self, now_ms: int, group_id: str,
                    members: list[tuple[str, str | None]]) -> CoordinatorResult:
        group = self._classic(group_id)
        if group is None or group.is_in(S.DEAD):
            return CoordinatorResult(response=(E.unknown_member_id, []))
        results = []
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
                self.ctx.cancel(_pending_key(group_id, member_id))
                removed = True
            elif member_id in group.members:
                self._remove_member(group, member_id, E.unknown_member_id)
                removed = True
            else:
                error = E.unknown_member_id
            results.append((member_id, instance_id, error))
        records = self._after_removal(now_ms, group) if removed else []
        return CoordinatorResult(records, (E.none, results), replay=False)

    # --- offsets ------------------------------------------------------------------------

    def commit_offsets(self, now_ms: int, group_id: str, generation_id: int, member_id: str,
                       instance_id: str | None,
                       offsets: Iterable[tuple[str, int, int, int, str | None]],
                       version: int) -> CoordinatorResult:
        """``offsets`` are (topic, partition, offset, leader epoch, metadata); the response
        is {(topic, partition): error}."""
        offsets = list(offsets)
        error = self._validate_commit(group_id, generation_id, member_id, instance_id, version)
        if error is not None:
            return CoordinatorResult(response={(t, p): error for t, p, *_ in offsets})
        group = self._classic(group_id)
        if group is not None and member_id in group.members:
            member = group.members[member_id]
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        records = []
        results = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = E.offset_metadata_too_large
                continue
            records.append(commit_record(group_id, topic, partition, offset, leader_epoch,
                                         metadata, now_ms))
            results[(topic, partition)] = E.none
        return CoordinatorResult(records, results)

    def _validate_commit(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, version: int) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                return None  # a simple commit creates an empty group
            return E.group_id_not_found if version >= 9 else E.illegal_generation
        if isinstance(group, ConsumerGroup):
            if generation_id < 0 and not group.members:
                return None  # an admin commit to an empty group
            consumer = group.members.get(member_id)
            if consumer is None:
                return E.unknown_member_id
            if generation_id != consumer.member_epoch:
                return E.stale_member_epoch if version >= 9 else E.illegal_generation
            return None
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

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> list[tuple[str, list[tuple[int, int, int, str]]]]:
        """(topic, [(partition, offset, leader epoch, metadata)]); all topics if None.
        A KIP-848 member that names itself (OffsetFetch v9) must have the current epoch."""
        group = self.groups.get(group_id)
        if member_id and member_epoch >= 0 and isinstance(group, ConsumerGroup):
            member = group.members.get(member_id)
            if member is None:
                raise KafkaError(E.unknown_member_id, f"Member {member_id} is unknown.")
            if member.member_epoch != member_epoch:
                raise KafkaError(E.stale_member_epoch,
                                 f"The member epoch {member_epoch} is stale.")
        committed = self.offsets.topics(group_id)
        if topics is None:
            return [(topic, [(p, o.offset, o.leader_epoch, o.metadata)
                             for p, o in sorted(parts.items())])
                    for topic, parts in committed.items()]
        result = []
        for topic, partitions in topics:
            parts = committed.get(topic, {})
            entries = []
            for p in partitions:
                o = parts.get(p)
                entries.append((p, o.offset, o.leader_epoch, o.metadata) if o
                               else (p, -1, -1, ""))
            result.append((topic, entries))
        return result

    def delete_offsets(self, now_ms: int, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> CoordinatorResult:
        group = self.groups.get(group_id)
        if group is None or (isinstance(group, ClassicGroup) and group.is_in(S.DEAD)):
            return CoordinatorResult(response=(E.group_id_not_found, {}))
        if isinstance(group, ClassicGroup) and not group.is_in(S.EMPTY) and \
                group.protocol_type != "consumer":
            return CoordinatorResult(response=(E.non_empty_group, {}))
        records = []
        results = {}
        for topic, partitions in topics:
            if isinstance(group, ConsumerGroup):
                subscribed = topic in self._subscribed_names(group, self.topics())
            else:
                subscribed = group.is_subscribed_to(topic)
            for p in partitions:
                if subscribed:
                    results[(topic, p)] = E.group_subscribed_to_topic
                    continue
                results[(topic, p)] = E.none
                if self.offsets.get(group_id, topic, p) is not None:
                    records.append(tombstone(group_id, topic, p))
        return CoordinatorResult(records, (E.none, results))

    def expire_offsets(self, now_ms: int) -> CoordinatorResult:
        """offsets.retention.minutes: an empty group's offsets expire that long after it
        became empty; a consumer group's, that long after their commit once it no longer
        subscribes to their topic. A group left with nothing is deleted."""
        retention = self.config.offsets_retention_ms
        records: list[Any] = []
        for group_id, group in list(self.groups.items()):
            if isinstance(group, ConsumerGroup):
                empty = not group.members
                since_empty = group.state_timestamp_ms
                subscribed: set[str] | None = self._subscribed_names(group, self.topics())
            else:
                empty = group.is_in(S.EMPTY)
                since_empty = group.current_state_timestamp
                subscribed = group.subscribed_topics if group.protocol_type == "consumer" \
                    else None
            expired = []
            for topic, partition, committed in self.offsets.all(group_id):
                if empty:
                    base = max(since_empty, committed.commit_timestamp_ms)
                elif subscribed is not None and topic not in subscribed:
                    base = committed.commit_timestamp_ms
                else:
                    continue
                if base + retention <= now_ms:
                    expired.append(tombstone(group_id, topic, partition))
            records.extend(expired)
            remaining = sum(1 for _ in self.offsets.all(group_id)) - len(expired)
            if empty and remaining == 0:
                records.extend(self._group_tombstones(group))
        if records:
            log.info("Expiring %d offsets and groups", len(records))
        self.ctx.schedule(EXPIRE_OFFSETS_KEY, self.config.offsets_retention_check_interval_ms,
                          lambda shard, now: shard.expire_offsets(now))
        return CoordinatorResult(records)

    def _group_tombstones(self, group: ClassicGroup | ConsumerGroup
                          ) -> list[rec.CoordinatorRecord]:
        if isinstance(group, ConsumerGroup):
            return [rec.CoordinatorRecord(rec.ConsumerGroupTargetAssignmentMetadataKey(
                        group_id=group.group_id), None),
                    rec.CoordinatorRecord(rec.ConsumerGroupMetadataKey(
                        group_id=group.group_id), None)]
        return [rec.CoordinatorRecord(rec.GroupMetadataKey(group=group.group_id), None)]

    # --- admin ----------------------------------------------------------------------------

    def list_groups(self, states: set[str], types: set[str]) -> list[dict[str, Any]]:
        result = []
        for group in self.groups.values():
            if isinstance(group, ClassicGroup) and group.is_in(S.DEAD):
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and group.group_type not in types:
                continue
            result.append({"group_id": group.group_id,
                           "protocol_type": group.protocol_type or "",
                           "group_state": group.state.value, "group_type": group.group_type})
        return result

    def describe_group(self, group_id: str) -> dict[str, Any] | None:
        group = self._classic(group_id)
        if group is None:
            return None
        stable = group.is_in(S.STABLE)
        members = []
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

    def delete_groups(self, now_ms: int, group_ids: list[str]) -> CoordinatorResult:
        records: list[Any] = []
        results = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or (isinstance(group, ClassicGroup) and group.is_in(S.DEAD)):
                results[group_id] = E.group_id_not_found
                continue
            if group.members if isinstance(group, ConsumerGroup) else not group.is_in(S.EMPTY):
                results[group_id] = E.non_empty_group
                continue
            for topic, partition, _ in self.offsets.all(group_id):
                records.append(tombstone(group_id, topic, partition))
            records.extend(self._group_tombstones(group))
            results[group_id] = E.none
        return CoordinatorResult(records, results)
