"""The group coordinator shard on the coordinator runtime, with an in-memory partition:
the classic protocol's states and barriers, timers, offsets, and replay equivalence."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from ottla.broker.coordinators.coordinator_service import java_string_hash, partition_for
from ottla.coordinator.group import records as rec
from ottla.coordinator.group.classic import (
    ClassicGroup,
    ClassicMember,
    ClassicState,
    IllegalStateTransition,
)
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard, JoinRequest
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.protocol.errors import ErrorCode as E
from ottla.protocol.errors import KafkaError

TP = ("__consumer_offsets", 0)


class MemoryPartition:
    """A partition log in memory; records round-trip through Kafka's byte layout."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, bytes | None]] = []
        self.high_watermark_lag = 0

    def append(self, tp: Any, records: list[Any], now_ms: int) -> int:
        self.entries.extend(rec.encode(r) for r in records)
        return len(self.entries)

    def high_watermark(self, tp: Any) -> int:
        return len(self.entries) - self.high_watermark_lag

    def read(self, tp: Any):
        for offset, (key, value) in enumerate(self.entries):
            yield offset, rec.decode(key, value)


class Harness:
    def __init__(self, **config: Any) -> None:
        self.partition = MemoryPartition()
        self.config = GroupConfig(**{"initial_rebalance_delay_ms": 0, **config})
        ids = itertools.count(1)
        self.runtime = CoordinatorRuntime(self.partition, lambda ctx: GroupCoordinatorShard(
            ctx, self.config, new_member_id=lambda client: f"{client}-{next(ids)}"))
        self.now = 1_000_000
        self.runtime.load(TP, self.now)

    @property
    def shard(self) -> GroupCoordinatorShard:
        return self.runtime.active(TP).shard

    def write(self, op) -> list[Any]:
        """Run a write; return the replies it got so far (a parked request gets none)."""
        replies: list[Any] = []
        self.runtime.write(TP, lambda shard, now: op(shard, now, replies.append),
                           replies.append, self.now)
        return replies

    def advance(self, ms: int) -> None:
        self.now += ms
        self.runtime.poll(self.now)

    def join(self, member_id: str = "", client: str = "c", protocols=(("range", b"r"),),
             instance_id: str | None = None, session_ms: int = 10_000,
             rebalance_ms: int = 20_000, version: int = 9) -> list[Any]:
        request = JoinRequest("g", member_id, instance_id, "consumer", list(protocols),
                              session_ms, rebalance_ms, client, "/127.0.0.1", version)
        return self.write(lambda shard, now, reply: shard.join_group(now, request, reply))

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None
             ) -> list[Any]:
        return self.write(lambda shard, now, reply: shard.sync_group(
            now, "g", generation, member_id, None, None, None, assignments or {}, reply))

    def heartbeat(self, member_id: str, generation: int) -> E:
        return self.write(lambda shard, now, reply: shard.heartbeat(
            now, "g", generation, member_id, None))[0]

    def group(self) -> ClassicGroup:
        return self.shard.groups["g"]


def join_known(h: Harness, client: str, **kwargs: Any) -> tuple[str, list[Any]]:
    """The KIP-394 round trip: MEMBER_ID_REQUIRED, then the join with that id."""
    first = h.join(client=client, **kwargs)
    assert first[0]["error_code"] == E.member_id_required
    member_id = first[0]["member_id"]
    return member_id, h.join(member_id, client=client, **kwargs)


def stable_group_of_two(h: Harness) -> tuple[str, str]:
    a, replies_a = join_known(h, "a")
    b, replies_b = join_known(h, "b")
    assert replies_a == [] and replies_b == []  # parked behind the barrier
    assert h.group().state is ClassicState.PREPARING_REBALANCE
    h.advance(0)  # the initial join timer (delay 0) closes the barrier
    assert h.group().state is ClassicState.COMPLETING_REBALANCE
    assert [r["generation_id"] for r in replies_a + replies_b] == [1, 1]
    assert replies_a[0]["leader"] == a and len(replies_a[0]["members"]) == 2
    assert replies_b[0]["members"] == []
    follower = h.sync(b, 1)
    assert follower == []  # waits for the leader's assignment
    leader = h.sync(a, 1, {a: b"A", b: b"B"})
    assert [r["assignment"] for r in follower + leader] == [b"B", b"A"]
    assert h.group().state is ClassicState.STABLE
    return a, b


def test_join_sync_reach_stable_and_the_record_replays_to_the_same_group() -> None:
    h = Harness()
    a, b = stable_group_of_two(h)
    h.write(lambda shard, now, reply: shard.commit_offsets(
        now, "g", 1, a, None, [("t", 0, 42, 3, "meta")], 9))

    runtime = CoordinatorRuntime(h.partition, lambda ctx: GroupCoordinatorShard(ctx, h.config))
    runtime.load(TP, h.now)
    loaded = runtime.active(TP).shard.groups["g"]
    live = h.group()
    assert (loaded.state, loaded.generation_id, loaded.leader_id, loaded.protocol_name) == \
        (live.state, live.generation_id, live.leader_id, live.protocol_name)
    assert {m: loaded.members[m].assignment for m in loaded.members} == {a: b"A", b: b"B"}
    assert runtime.active(TP).shard.fetch_offsets("g", [("t", [0, 1])]) == \
        [("t", [(0, 42, 3, "meta"), (1, -1, -1, "")])]


def test_heartbeat_errors_follow_the_group_state() -> None:
    h = Harness()
    a, b = stable_group_of_two(h)
    assert h.heartbeat(a, 1) == E.none
    assert h.heartbeat(a, 0) == E.illegal_generation
    assert h.heartbeat("nobody", 1) == E.unknown_member_id
    _c, _ = join_known(h, "c")
    assert h.group().state is ClassicState.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == E.rebalance_in_progress
    # The old members rejoin; the barrier closes as soon as everyone is in.
    ra, rb = h.join(a, client="a"), h.join(b, client="b")
    assert h.group().state is ClassicState.COMPLETING_REBALANCE
    assert [r[0]["generation_id"] for r in (ra, rb)] == [2, 2]


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    a, b = stable_group_of_two(h)
    for _ in range(4):
        h.advance(4000)
        assert h.heartbeat(a, 1) in (E.none, E.rebalance_in_progress)
    assert b not in h.group().members
    assert h.group().state is ClassicState.PREPARING_REBALANCE
    rejoined = h.join(a, client="a")
    assert rejoined[0]["generation_id"] == 2 and rejoined[0]["members"][0]["member_id"] == a


def test_last_member_leaving_empties_the_group_and_offsets_expire() -> None:
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    a, b = stable_group_of_two(h)
    h.write(lambda shard, now, reply: shard.commit_offsets(
        now, "g", 1, a, None, [("t", 0, 7, -1, None)], 9))
    replies = h.write(lambda shard, now, reply: shard.leave_group(now, "g", [(a, None),
                                                                            (b, None)]))
    assert replies[0] == (E.none, [(a, None, E.none), (b, None, E.none)])
    assert h.group().state is ClassicState.EMPTY and h.group().generation_id == 2
    assert h.shard.fetch_offsets("g", [("t", [0])])[0][1][0][1] == 7
    h.advance(30_000)
    assert "g" in h.shard.groups
    h.advance(40_000)
    assert "g" not in h.shard.groups
    assert h.shard.fetch_offsets("g", None) == []


def test_commit_validation() -> None:
    h = Harness(offset_metadata_max_bytes=5)
    commit = [("t", 0, 1, -1, None)]
    # A commit with a generation for a group that does not exist.
    assert h.write(lambda s, now, r: s.commit_offsets(now, "g", 3, "m", None, commit, 8))[0] \
        == {("t", 0): E.illegal_generation}
    # A simple commit creates an empty group.
    assert h.write(lambda s, now, r: s.commit_offsets(now, "g", -1, "", None, commit, 8))[0] \
        == {("t", 0): E.none}
    assert h.group().state is ClassicState.EMPTY
    too_long = [("t", 1, 1, -1, "123456")]
    assert h.write(lambda s, now, r: s.commit_offsets(now, "g", -1, "", None, too_long, 8))[0] \
        == {("t", 1): E.offset_metadata_too_large}
    a, _b = stable_group_of_two(h)
    assert h.write(lambda s, now, r: s.commit_offsets(now, "g", 0, a, None, commit, 8))[0] == \
        {("t", 0): E.illegal_generation}
    assert h.write(lambda s, now, r: s.commit_offsets(now, "g", -1, "", None, commit, 8))[0] \
        == {("t", 0): E.unknown_member_id}
    deleted = h.write(lambda s, now, r: s.delete_groups(now, ["g", "nope"]))[0]
    assert deleted == {"g": E.non_empty_group, "nope": E.group_id_not_found}


def test_protocol_is_chosen_by_vote_among_common_protocols() -> None:
    group = ClassicGroup("g")
    for i, prefs in enumerate([["roundrobin", "range"], ["range", "roundrobin"],
                               ["range", "sticky", "roundrobin"]]):
        group.add(ClassicMember(f"m{i}", None, "c", "h", 1000, 1000, "consumer",
                                [(p, b"") for p in prefs]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"
    assert group.supports_protocols("consumer", [("sticky", b"")]) is False
    assert group.supports_protocols("connect", [("range", b"")]) is False


def test_illegal_state_transitions_are_refused() -> None:
    group = ClassicGroup("g")
    with pytest.raises(IllegalStateTransition):
        group.transition(ClassicState.STABLE, 0)
    group.transition(ClassicState.PREPARING_REBALANCE, 0)
    with pytest.raises(IllegalStateTransition):
        group.transition(ClassicState.STABLE, 0)


def test_inconsistent_protocols_and_bad_session_timeouts() -> None:
    h = Harness()
    stable_group_of_two(h)
    other = h.join(client="x", protocols=(("roundrobin", b""),))
    assert other[0]["error_code"] == E.inconsistent_group_protocol
    too_short = h.join(client="x", session_ms=10)
    assert too_short[0]["error_code"] == E.invalid_session_timeout


def test_responses_wait_for_the_high_watermark() -> None:
    h = Harness()
    a, _b = stable_group_of_two(h)
    h.partition.high_watermark_lag = 1  # the next record is written but not replicated
    replies = h.write(lambda s, now, r: s.commit_offsets(now, "g", 1, a, None,
                                                         [("t", 0, 5, -1, None)], 9))
    assert replies == []
    # Nobody reads the commit back before it is committed (a failover could undo it).
    fetched = h.runtime.read(TP, lambda s: s.fetch_offsets("g", [("t", [0])]))
    assert fetched == [("t", [(0, -1, -1, "")])]
    h.partition.high_watermark_lag = 0
    h.runtime.on_high_watermark(TP)
    assert replies == [{("t", 0): E.none}]
    fetched = h.runtime.read(TP, lambda s: s.fetch_offsets("g", [("t", [0])]))
    assert fetched == [("t", [(0, 5, -1, "")])]


def test_routing_errors_before_load() -> None:
    runtime = CoordinatorRuntime(MemoryPartition(), lambda ctx: GroupCoordinatorShard(
        ctx, GroupConfig()))
    with pytest.raises(KafkaError) as e:
        runtime.active(TP)
    assert e.value.code == E.not_coordinator


def test_group_partition_matches_kafka_hashing() -> None:
    assert java_string_hash("abc") == 96354
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("abc", 50) == 96354 % 50
    assert partition_for("zz\u00e9", 50) == java_string_hash("zz\u00e9") % 50
