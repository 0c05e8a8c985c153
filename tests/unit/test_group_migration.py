"""Online migration between the group protocols (KIP-848, seed 000): classic members
(JoinGroup/SyncGroup/Heartbeat/LeaveGroup) inside a consumer group, the upgrade of a
classic group by a consumer-protocol member, the downgrade when the last one leaves, and
``group.consumer.migration.policy``; each checked against what a client sees and against
the records (which replay to the same groups)."""

from __future__ import annotations

import io
import itertools
import uuid
from typing import Any

import pytest
from kio.schema.consumer_protocol_subscription.v3 import data as sub_v3
from kio.serial import entity_writer

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import ClassicGroup, ClassicState
from ottla.coordinator.group.config import MigrationPolicy
from ottla.coordinator.group.consumer_group import ConsumerGroup, MemberState
from ottla.coordinator.group.consumer_protocol import (
    ConsumerGroupConfig,
    HeartbeatRequest,
    decode_assignment,
    encode_assignment,
)
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard, JoinRequest
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.protocol.errors import ErrorCode as E
from tests.unit.test_group_coordinator import TP, MemoryPartition

T1 = uuid.UUID(int=1)
ALL = set(range(6))


def subscription(owned: set[int] = frozenset(), topics: tuple[str, ...] = ("orders",)
                 ) -> bytes:
    """A ConsumerProtocolSubscription v3, as a Java or librdkafka client writes it."""
    buf = io.BytesIO(b"\x00\x03")
    buf.seek(2)
    entity_writer(sub_v3.ConsumerProtocolSubscription)(buf, sub_v3.ConsumerProtocolSubscription(
        topics=topics, user_data=None, generation_id=-1, rack_id=None,
        owned_partitions=(sub_v3.TopicPartition(topic="orders", partitions=tuple(sorted(owned))),)
        if owned else ()))
    return buf.getvalue()


def partitions(assignment: bytes) -> set[int]:
    return decode_assignment(assignment).get("orders", set())


def assigned(response: dict) -> set[int]:
    return {p for tp in response["assignment"]["topic_partitions"] for p in tp["partitions"]}


class Node:
    """One coordinator shard on an in-memory partition, with a topic of six partitions."""

    def __init__(self, policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> None:
        self.partition = MemoryPartition()
        self.topics = {"orders": (T1, 6)}
        self.config = GroupConfig(initial_rebalance_delay_ms=0, migration_policy=policy)
        self.ids = itertools.count(1)
        self.runtime = self.load()
        self.now = 1_000_000

    def load(self) -> CoordinatorRuntime:
        runtime = CoordinatorRuntime(self.partition, lambda ctx: GroupCoordinatorShard(
            ctx, self.config, new_member_id=lambda client: f"{client}-{next(self.ids)}",
            topics=lambda: self.topics,
            consumer_config=ConsumerGroupConfig(assignment_interval_ms=0)))
        runtime.load(TP, 1_000_000)
        return runtime

    def write(self, op) -> list[Any]:
        replies: list[Any] = []
        self.runtime.write(TP, lambda shard, now: op(shard, now, replies.append),
                           replies.append, self.now)
        return replies

    def advance(self, ms: int) -> None:
        self.now += ms
        self.runtime.poll(self.now)

    @property
    def group(self) -> ClassicGroup | ConsumerGroup:
        return self.runtime.active(TP).shard.groups["g"]

    # --- the consumer protocol ---

    def heartbeat(self, member_id: str, epoch: int, owned: set[int] | None = None) -> dict:
        request = HeartbeatRequest("g", member_id, epoch, None, None,
                                   30_000 if epoch == 0 else -1,
                                   ("orders",) if epoch == 0 else None, None, None,
                                   None if owned is None else {T1: owned} if owned else {},
                                   "kip848", "/127.0.0.1")
        return self.write(lambda s, now, _r: s.consumer_group_heartbeat(now, request))[0]

    # --- the classic protocol ---

    def join(self, member_id: str = "", owned: set[int] = frozenset(),
             protocols: tuple[str, ...] = ("range", "roundrobin"), protocol_type="consumer",
             session_ms: int = 10_000, rebalance_ms: int = 20_000) -> list[dict]:
        metadata = subscription(owned)
        request = JoinRequest("g", member_id, None, protocol_type,
                              [(name, metadata) for name in protocols], session_ms,
                              rebalance_ms, "classic", "/127.0.0.1", 9)
        return self.write(lambda s, now, reply: s.join_group(now, request, reply))

    def join_new(self, **kwargs: Any) -> dict:
        """The KIP-394 round trip: MEMBER_ID_REQUIRED, then the join with that id."""
        first = self.join(**kwargs)[0]
        assert first["error_code"] == E.member_id_required
        (reply,) = self.join(first["member_id"], **kwargs)
        return reply

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             protocol_name: str | None = "range") -> list[dict]:
        return self.write(lambda s, now, reply: s.sync_group(
            now, "g", generation, member_id, None, "consumer", protocol_name,
            assignments or {}, reply))

    def classic_heartbeat(self, member_id: str, generation: int) -> E:
        return self.write(lambda s, now, _r: s.heartbeat(now, "g", generation, member_id,
                                                         None))[0]

    def leave(self, *member_ids: str) -> list[tuple[str, str | None, E]]:
        (reply,) = self.write(lambda s, now, _r: s.leave_group(
            now, "g", [(m, None) for m in member_ids]))
        return reply[1]

    def records_since(self, start: int) -> list[rec.CoordinatorRecord]:
        return [rec.decode(k, v) for k, v in self.partition.entries[start:]]

    def assert_replays_to_the_same_group(self) -> None:
        live, again = self.group, self.load().active(TP).shard.groups["g"]
        assert type(again) is type(live)
        if isinstance(live, ConsumerGroup):
            assert (again.group_epoch, again.assignment_epoch) == \
                (live.group_epoch, live.assignment_epoch)
            assert again.members == live.members and again.target == live.target
        else:
            assert (again.generation_id, again.protocol_name, again.leader_id) == \
                (live.generation_id, live.protocol_name, live.leader_id)
            assert {m: (again.members[m].assignment, again.members[m].session_timeout_ms)
                    for m in again.members} == \
                {m: (live.members[m].assignment, live.members[m].session_timeout_ms)
                 for m in live.members}


def stable_classic_group(node: Node) -> tuple[str, str, int]:
    """Two classic members, ``a`` (the leader: 0-2) and ``b`` (3-5), stable."""
    a = node.join()[0]["member_id"]
    b = node.join()[0]["member_id"]
    replies = node.join(a) + node.join(b)
    assert replies == []
    node.advance(0)  # the initial join delay (0) closes the barrier
    generation = node.group.generation_id
    node.sync(b, generation)
    node.sync(a, generation, {a: encode_assignment({"orders": {0, 1, 2}}, 3),
                              b: encode_assignment({"orders": {3, 4, 5}}, 3)})
    assert node.group.state is ClassicState.STABLE
    return a, b, generation


def test_a_classic_member_joins_syncs_and_heartbeats_in_a_consumer_group() -> None:
    node = Node()
    first = node.heartbeat("k", 0)
    assert first["member_epoch"] == 1
    joined = node.join_new(session_ms=7_000)
    member = joined["member_id"]
    # No barrier and no leader: the generation is the member epoch, the protocol its first.
    assert (joined["error_code"], joined["generation_id"], joined["protocol_type"],
            joined["protocol_name"], joined["leader"], joined["members"]) == \
        (E.none, 2, "consumer", "range", "", [])
    revoking = node.heartbeat("k", 1, owned=ALL)  # k must give up half first
    keep = assigned(revoking)
    assert revoking["member_epoch"] == 1 and len(keep) == 3
    (synced,) = node.sync(member, 2)
    assert synced["error_code"] == E.none and partitions(synced["assignment"]) == set()
    # Its partitions are still with k: nothing to do yet.
    assert node.classic_heartbeat(member, 2) == E.none
    assert node.heartbeat("k", 1, owned=keep)["member_epoch"] == 2  # the rest is free now
    # Now a join would hand over the free partitions: the heartbeat says so.
    assert node.classic_heartbeat(member, 2) == E.rebalance_in_progress
    (rejoined,) = node.join(member, session_ms=7_000)
    assert rejoined["generation_id"] == 2
    (synced,) = node.sync(member, 2)
    assert partitions(synced["assignment"]) == ALL - keep
    assert node.classic_heartbeat(member, 2) == E.none
    assert node.group.state.value == "Stable"
    described = node.runtime.active(TP).shard.describe_consumer_group("g")
    assert sorted(m["member_type"] for m in described["members"]) == [0, 1]
    node.assert_replays_to_the_same_group()
    classic = node.group.members[member].classic
    assert classic.session_timeout_ms == 7_000 and classic.protocol_name == "range"


def test_classic_requests_to_a_consumer_group_get_kafkas_errors() -> None:
    node = Node()
    node.heartbeat("k", 0)
    member = node.join_new()["member_id"]
    assert node.join(protocol_type="connect")[0]["error_code"] == E.inconsistent_group_protocol
    assert node.join(member, protocols=("sticky",))[0]["error_code"] == \
        E.inconsistent_group_protocol
    assert node.sync("nobody", 2)[0]["error_code"] == E.unknown_member_id
    assert node.sync("k", 1)[0]["error_code"] == E.unknown_member_id  # not a classic member
    assert node.sync(member, 1)[0]["error_code"] == E.illegal_generation
    assert node.sync(member, 2, protocol_name="roundrobin")[0]["error_code"] == \
        E.inconsistent_group_protocol
    assert node.classic_heartbeat(member, 7) == E.illegal_generation
    assert node.classic_heartbeat("k", 1) == E.unknown_member_id
    node.heartbeat("j", 0)  # a new member: the group epoch moves past the classic member's
    assert node.sync(member, 2)[0]["error_code"] == E.rebalance_in_progress
    assert node.classic_heartbeat(member, 2) == E.rebalance_in_progress
    # Its commits are checked against its epoch, as a generation.
    commit = [("orders", 0, 5, -1, None)]
    replies = node.write(lambda s, now, _r: s.commit_offsets(now, "g", 9, member, None, commit, 9))
    assert replies == [{("orders", 0): E.illegal_generation}]


def test_classic_members_leave_time_out_and_must_rejoin_in_time() -> None:
    node = Node()
    node.heartbeat("k", 0)
    quiet = node.join_new(session_ms=7_000)["member_id"]
    leaving = node.join_new()["member_id"]
    slow = node.join_new(rebalance_ms=5_000)["member_id"]
    epoch = node.group.group_epoch
    assert node.leave(leaving, "k") == [(leaving, None, E.none), ("k", None, E.unknown_member_id)]
    assert leaving not in node.group.members and node.group.group_epoch == epoch + 1
    # Told to rejoin, ``slow`` has its rebalance timeout (5 s) to do it; heartbeats alone
    # keep its session but not its place.
    assert node.classic_heartbeat(slow, node.group.members[slow].member_epoch) == \
        E.rebalance_in_progress
    for _ in range(3):
        node.advance(2_000)
        node.heartbeat("k", node.group.members["k"].member_epoch, owned=None)
        if slow in node.group.members:
            node.classic_heartbeat(slow, node.group.members[slow].member_epoch)
    assert slow not in node.group.members and quiet in node.group.members
    # ``quiet`` sent nothing: its own 7 s session, not the consumer protocol's 45 s.
    node.advance(2_000)
    assert quiet not in node.group.members
    assert set(node.group.members) == {"k"}
    node.assert_replays_to_the_same_group()


def test_a_consumer_member_upgrades_a_classic_group() -> None:
    node = Node()
    a, b, generation = stable_classic_group(node)
    start = len(node.partition.entries)
    parked = node.join(a)  # the leader rejoins: a rebalance starts, its join waits
    assert parked == [] and node.group.state is ClassicState.PREPARING_REBALANCE
    joined = node.heartbeat("k", 0)
    assert joined["error_code"] == E.none
    # The parked join is told to rejoin; the group is a consumer group now.
    assert parked[0]["error_code"] == E.rebalance_in_progress
    group = node.group
    assert isinstance(group, ConsumerGroup)
    records = node.records_since(start)
    assert records[0] == rec.CoordinatorRecord(rec.GroupMetadataKey(group="g"), None)
    kinds = [type(r.key).__name__ for r in records[1:9]]
    assert kinds == ["ConsumerGroupMemberMetadataKey"] * 2 + ["ConsumerGroupMetadataKey"] + \
        ["ConsumerGroupTargetAssignmentMemberKey"] * 2 + \
        ["ConsumerGroupTargetAssignmentMetadataKey"] + \
        ["ConsumerGroupCurrentMemberAssignmentKey"] * 2
    assert records[3].value.epoch == generation
    assert records[1].value.classic_member_metadata.session_timeout_ms == 10_000
    # The classic members keep what they had, at the generation's epoch.
    assert group.members[a].assigned == {T1: {0, 1, 2}}
    assert group.members[b].assigned == {T1: {3, 4, 5}}
    assert group.members[a].member_epoch == generation
    assert group.members["k"].state is MemberState.UNRELEASED_PARTITIONS
    assert group.group_epoch == generation + 1
    # Their heartbeats (with their generation) send them to rejoin.
    assert node.classic_heartbeat(a, generation) == E.rebalance_in_progress
    assert node.classic_heartbeat(b, generation) == E.rebalance_in_progress
    node.assert_replays_to_the_same_group()
    # Eager members rejoin owning nothing; the new member gets what they released.
    for member in (a, b):
        (reply,) = node.join(member)
        assert reply["generation_id"] == generation + 1
    got = assigned(node.heartbeat("k", generation + 1, owned=set()))
    held = [partitions(node.sync(m, generation + 1)[0]["assignment"]) for m in (a, b)]
    assert len(got) == 2 and sorted(map(len, held)) == [2, 2]
    assert got | held[0] | held[1] == ALL and not got & (held[0] | held[1])


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    node = Node()
    a, b, generation = stable_classic_group(node)
    node.heartbeat("k", 0)
    for member in (a, b):
        node.join(member)
    node.heartbeat("k", generation + 1, owned=set())
    epoch = node.group.group_epoch
    targets = {m: set(node.group.target[m].get(T1, ())) for m in (a, b)}
    start = len(node.partition.entries)
    left = node.heartbeat("k", -1)
    assert left["error_code"] == E.none
    group = node.group
    assert isinstance(group, ClassicGroup)
    # A classic group of the two, at the group epoch, rebalancing; each holds its target.
    assert group.state is ClassicState.PREPARING_REBALANCE
    assert (group.generation_id, group.protocol_type, group.protocol_name) == \
        (epoch, "consumer", "range")
    assert {m: partitions(group.members[m].assignment) for m in (a, b)} == targets
    records = node.records_since(start)
    assert [r.value for r in records[:-1]] == [None] * (len(records) - 1)
    assert isinstance(records[-1].key, rec.GroupMetadataKey)
    assert records[-1].value.generation == epoch and len(records[-1].value.members) == 2
    node.assert_replays_to_the_same_group()
    # The members learn of the rebalance from their heartbeats and rejoin as classic ones.
    assert node.classic_heartbeat(a, epoch) == E.rebalance_in_progress
    replies = node.join(a) + node.join(b)
    assert [r["generation_id"] for r in replies] == [epoch + 1] * 2
    assert sum(len(r["members"]) for r in replies) == 2  # the leader's list


@pytest.mark.parametrize("policy", list(MigrationPolicy))
def test_the_migration_policy(policy: MigrationPolicy) -> None:
    node = Node(policy)
    stable_classic_group(node)
    upgrade = node.heartbeat("k", 0)
    if not policy.upgrade_enabled:
        assert upgrade["error_code"] == E.group_id_not_found
        assert isinstance(node.group, ClassicGroup)
        return
    assert upgrade["error_code"] == E.none and isinstance(node.group, ConsumerGroup)
    node.heartbeat("k", -1)
    assert isinstance(node.group, ClassicGroup if policy.downgrade_enabled else ConsumerGroup)


def test_disabled_keeps_classic_members_out_of_consumer_groups() -> None:
    node = Node(MigrationPolicy.DISABLED)
    node.heartbeat("k", 0)
    assert node.join()[0]["error_code"] == E.inconsistent_group_protocol


def test_with_downgrade_disabled_a_group_of_classic_members_stays_a_consumer_group() -> None:
    node = Node(MigrationPolicy.UPGRADE)
    node.heartbeat("k", 0)
    member = node.join_new()["member_id"]
    node.heartbeat("k", -1)
    assert isinstance(node.group, ConsumerGroup) and set(node.group.members) == {member}


def test_empty_groups_change_kind_whatever_the_policy() -> None:
    node = Node(MigrationPolicy.DISABLED)
    node.heartbeat("k", 0)
    node.heartbeat("k", -1)
    start = len(node.partition.entries)
    assert node.join()[0]["error_code"] == E.member_id_required
    assert isinstance(node.group, ClassicGroup)
    assert [type(r.key).__name__ for r in node.records_since(start)] == \
        ["ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupMetadataKey"]
    start = len(node.partition.entries)
    assert node.heartbeat("j", 0)["error_code"] == E.none
    assert isinstance(node.group, ConsumerGroup)
    assert node.records_since(start)[0] == \
        rec.CoordinatorRecord(rec.GroupMetadataKey(group="g"), None)


def test_classic_member_metadata_is_written_as_kafka_writes_it() -> None:
    """A nullable struct in a tagged field: tag, size, a presence byte, then the struct."""
    value = rec.ConsumerGroupMemberMetadataValue(
        client_id="c", client_host="h", classic_member_metadata=rec.ClassicMemberMetadata(
            session_timeout_ms=6000, supported_protocols=(
                rec.ClassicProtocol(name="range", metadata=b"\x00\x01"),)))
    record = rec.CoordinatorRecord(rec.ConsumerGroupMemberMetadataKey(group_id="g",
                                                                      member_id="m"), value)
    _, encoded = rec.encode(record)
    struct = bytes.fromhex("00001770" "02" "0672616e6765" "03" "0001" "00" "00")
    assert encoded.endswith(bytes([1, 0, len(struct) + 1, 1]) + struct)
    assert rec.decode(*rec.encode(record)) == record
    assert MigrationPolicy.parse("Upgrade") is MigrationPolicy.UPGRADE
    assert MigrationPolicy.parse("nonsense") is MigrationPolicy.DISABLED
