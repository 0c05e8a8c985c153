"""KIP-848: assignors, the reconciliation state machine, and consumer-group heartbeats on
the shard, including replay equivalence."""

from __future__ import annotations

import re
import uuid
from collections import Counter

import pytest

from ottla.coordinator.group.assignors import MemberSpec, range_, uniform
from ottla.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from ottla.coordinator.group.consumer_protocol import ConsumerGroupConfig, HeartbeatRequest
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard
from ottla.coordinator.group.topic_regex import topics_matching
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.protocol.errors import ErrorCode as E
from ottla.protocol.errors import KafkaError
from tests.unit.test_group_coordinator import TP, MemoryPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def spec(*topics: uuid.UUID, previous: dict | None = None) -> MemberSpec:
    return MemberSpec(frozenset(topics), {t: frozenset(p) for t, p in (previous or {}).items()})


def counts(assignment: dict) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in assignment.values())


def owners(assignment: dict) -> Counter:
    return Counter((t, p) for a in assignment.values() for t, ps in a.items() for p in ps)


def test_uniform_balances_within_one_and_is_sticky() -> None:
    members = {f"m{i}": spec(T1, T2) for i in range(3)}
    first = uniform(members, {T1: 7, T2: 4})
    assert counts(first) == [3, 4, 4]
    assert set(owners(first).values()) == {1} and len(owners(first)) == 11
    # A fourth member: everyone else keeps a subset of what they had.
    members = {m: spec(T1, T2, previous=first[m]) for m in first}
    members["m3"] = spec(T1, T2)
    second = uniform(members, {T1: 7, T2: 4})
    assert counts(second) == [2, 3, 3, 3]
    for m in first:
        for topic, partitions in second[m].items():
            assert partitions <= first[m].get(topic, set())


def test_uniform_respects_heterogeneous_subscriptions() -> None:
    result = uniform({"a": spec(T1), "b": spec(T1, T2), "c": spec(T2)}, {T1: 4, T2: 4})
    assert T2 not in result["a"] and T1 not in result["c"]
    assert len(owners(result)) == 8


def test_range_gives_contiguous_ranges_in_member_order() -> None:
    result = range_({"b": spec(T1, T2), "a": spec(T1, T2), "c": spec(T1)}, {T1: 7, T2: 4})
    assert result["a"] == {T1: {0, 1, 2}, T2: {0, 1}}
    assert result["b"] == {T1: {3, 4}, T2: {2, 3}}
    assert result["c"] == {T1: {5, 6}}


def test_reconciliation_revokes_before_it_assigns() -> None:
    group = ConsumerGroup("g", group_epoch=2, assignment_epoch=2)
    a = ConsumerMember("a", member_epoch=1, assigned={T1: {0, 1, 2, 3}})
    b = ConsumerMember("b", member_epoch=0)
    group.put_member(a)
    group.put_member(b)
    # a must give up 2 and 3: it stays on epoch 1 until it reports them gone.
    a2 = reconcile(group, a, {T1: {0, 1}}, 2, owned={T1: {0, 1, 2, 3}})
    assert (a2.state, a2.member_epoch, a2.assigned, a2.pending_revocation) == \
        (MemberState.UNREVOKED_PARTITIONS, 1, {T1: {0, 1}}, {T1: {2, 3}})
    group.put_member(a2)
    # b may not get 2 and 3 while a still holds them.
    b2 = reconcile(group, b, {T1: {2, 3}}, 2, owned={})
    assert (b2.state, b2.member_epoch, b2.assigned) == \
        (MemberState.UNRELEASED_PARTITIONS, 2, {})
    group.put_member(b2)
    assert reconcile(group, a2, {T1: {0, 1}}, 2, owned={T1: {0, 1, 2}}) is a2
    a3 = reconcile(group, a2, {T1: {0, 1}}, 2, owned={T1: {0, 1}})
    assert (a3.state, a3.member_epoch, a3.previous_member_epoch) == (MemberState.STABLE, 2, 1)
    group.put_member(a3)
    b3 = reconcile(group, b2, {T1: {2, 3}}, 2, owned={})
    assert (b3.state, b3.assigned) == (MemberState.STABLE, {T1: {2, 3}})


class Shard:
    def __init__(self, consumer_config: ConsumerGroupConfig | None = None) -> None:
        self.consumer_config = consumer_config or ConsumerGroupConfig(assignment_interval_ms=0)
        self.partition = MemoryPartition()
        self.topics = {"orders": (T1, 6)}
        self.runtime = CoordinatorRuntime(self.partition, self.factory)
        self.now = 1_000_000
        self.runtime.load(TP, self.now)

    def factory(self, ctx):
        return GroupCoordinatorShard(ctx, GroupConfig(), topics=lambda: self.topics,
                                     consumer_config=self.consumer_config)

    def heartbeat(self, member_id: str, epoch: int, owned: dict | None = None,
                  topics: tuple[str, ...] | None = ("orders",), instance: str | None = None,
                  group: str = "g", version: int = 1):
        request = HeartbeatRequest(group, member_id, epoch, instance, None,
                                   30_000 if epoch == 0 else -1, topics, None, None, owned,
                                   "client", "/127.0.0.1",
                                   client_generated_member_id=version >= 1)
        replies = []
        self.runtime.write(TP, lambda s, now: s.consumer_group_heartbeat(now, request),
                           replies.append, self.now)
        return replies[0]

    def group(self, runtime: CoordinatorRuntime | None = None) -> ConsumerGroup:
        return (runtime or self.runtime).active(TP).shard.groups["g"]


def assigned(response) -> set[int]:
    return {p for tp in response["assignment"]["topic_partitions"] for p in tp["partitions"]}


def test_heartbeats_converge_and_replay_rebuilds_the_same_group() -> None:
    s = Shard()
    r = s.heartbeat("a", 0)
    assert (r["error_code"], r["member_epoch"], assigned(r)) == (E.none, 1, set(range(6)))
    r = s.heartbeat("b", 0)
    assert (r["member_epoch"], assigned(r)) == (2, set())  # a still owns everything
    r = s.heartbeat("a", 1, owned={T1: set(range(6))})
    keep = assigned(r)
    assert len(keep) == 3 and r["member_epoch"] == 1  # revoke first, same epoch
    r = s.heartbeat("a", 1, owned={T1: keep})
    assert r["member_epoch"] == 2
    r = s.heartbeat("b", 2, owned={})
    assert assigned(r) == set(range(6)) - keep
    assert s.group().state.value == "Stable"

    reloaded = CoordinatorRuntime(s.partition, s.factory)
    reloaded.load(TP, s.now)
    live, again = s.group(), s.group(reloaded)
    assert (again.group_epoch, again.assignment_epoch, again.metadata_hash) == \
        (live.group_epoch, live.assignment_epoch, live.metadata_hash)
    assert again.members == live.members and again.target == live.target


def test_the_assignment_interval_is_the_groups_own_else_the_brokers_dynamic_one() -> None:
    """Kafka 4.4 computes a group's target assignment at most once per interval: the
    group's consumer.assignment.interval.ms, else group.consumer.assignment.interval.ms
    as AlterConfigs last set it; a member joining inside the interval waits for it."""
    broker = {"group.consumer.assignment.interval.ms": 5_000,
              "group.consumer.min.assignment.interval.ms": 0,
              "group.consumer.max.assignment.interval.ms": 15_000}
    s = Shard(ConsumerGroupConfig(
        group_overrides=lambda g: {"consumer.assignment.interval.ms": "0"} if g == "fast"
        else {"consumer.assignment.interval.ms": "12000"} if g == "slow" else {},
        broker=broker.__getitem__))
    start = s.now
    for group in ("fast", "slow", "default"):
        assert assigned(s.heartbeat("a", 0, group=group)) == set(range(6))
    s.now = start + 2_000
    for group in ("fast", "slow", "default"):
        s.heartbeat("b", 0, group=group)
    shard = s.runtime.active(TP).shard
    epochs = {g: (shard.groups[g].group_epoch, shard.groups[g].assignment_epoch)
              for g in ("fast", "slow", "default")}
    assert epochs == {"fast": (2, 2), "slow": (2, 1), "default": (2, 1)}
    s.now = start + 5_000  # the broker's interval has passed; the slow group's has not
    for group in ("slow", "default"):
        s.heartbeat("a", 1, owned={T1: set(range(6))}, group=group)
    assert shard.groups["default"].assignment_epoch == 2
    assert shard.groups["slow"].assignment_epoch == 1
    broker["group.consumer.assignment.interval.ms"] = 60_000  # clamped to the max, 15 s
    s.now = start + 12_000
    s.heartbeat("a", 1, owned={T1: set(range(6))}, group="slow")
    assert shard.groups["slow"].assignment_epoch == 2
    s.now = start + 14_000
    s.heartbeat("b", 0, group="other")  # a new group: its first assignment at once
    s.heartbeat("c", 0, group="other")
    s.now = start + 14_000 + 14_999
    s.heartbeat("c", 1, group="other")
    assert shard.groups["other"].assignment_epoch == 1
    s.now = start + 14_000 + 15_000
    s.heartbeat("c", 1, group="other")
    assert shard.groups["other"].assignment_epoch == 2


def test_a_member_id_is_the_clients_from_v1_and_an_unknown_group_is_not_found() -> None:
    """KIP-1082: from ConsumerGroupHeartbeat v1 the client makes its member id, so an
    empty one is INVALID_REQUEST even when joining (v0 gets one made); a member of a
    group the coordinator does not have gets GROUP_ID_NOT_FOUND (Kafka 4.4's answers)."""
    s = Shard()
    assert s.heartbeat("", 0)["error_code"] == E.invalid_request
    joined = s.heartbeat("", 0, version=0)
    assert joined["error_code"] == E.none and joined["member_id"]
    gone = s.heartbeat("a", 3, group="never-made")
    assert (gone["error_code"], gone["error_message"]) == (
        E.group_id_not_found, "Consumer group never-made not found.")


def test_epoch_fencing_and_leaving() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    assert s.heartbeat("a", 5)["error_code"] == E.fenced_member_epoch
    assert s.heartbeat("nobody", 1)["error_code"] == E.unknown_member_id
    assert s.heartbeat("", 1)["error_code"] == E.invalid_request
    # A lost response: retrying with the previous epoch is accepted.
    assert s.heartbeat("a", 0, owned={})["error_code"] == E.none
    left = s.heartbeat("a", -1)
    assert (left["error_code"], left["member_epoch"]) == (E.none, -1)
    assert s.group().state.value == "Empty"


def test_a_static_member_rejoining_takes_over_its_assignment() -> None:
    s = Shard()
    first = s.heartbeat("a", 0, instance="i-1")
    assert assigned(first) == set(range(6))
    assert s.heartbeat("b", 0, instance="i-1")["error_code"] == E.unreleased_instance_id
    assert s.heartbeat("a", -2, instance="i-1")["member_epoch"] == -2
    back = s.heartbeat("b", 0, instance="i-1")
    assert (back["error_code"], assigned(back)) == (E.none, set(range(6)))
    assert set(s.group().members) == {"b"}


def test_new_partitions_bump_the_group_epoch() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    epoch = s.group().group_epoch
    s.topics = {"orders": (T1, 8)}
    r = s.heartbeat("a", 1, owned={T1: set(range(6))})
    assert s.group().group_epoch == epoch + 1
    assert assigned(r) == set(range(8))


def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    shard = s.runtime.active(TP).shard
    commit = [("orders", 0, 10, -1, None)]
    replies = []
    s.runtime.write(TP, lambda sh, now: sh.commit_offsets(now, "g", 0, "a", None, commit, 9),
                    replies.append, s.now)
    s.runtime.write(TP, lambda sh, now: sh.commit_offsets(now, "g", 1, "a", None, commit, 9),
                    replies.append, s.now)
    assert replies == [{("orders", 0): E.stale_member_epoch}, {("orders", 0): E.none}]
    assert shard.fetch_offsets("g", [("orders", [0])], "a", 1) == [("orders", [(0, 10, -1, "")])]
    with pytest.raises(KafkaError) as stale:
        shard.fetch_offsets("g", [("orders", [0])], "a", 0)
    assert stale.value.code == E.stale_member_epoch


# SubscribedTopicRegex, as Kafka reads it: RE2/J syntax, the whole topic name.

ORDERS, ORDERS_EU, OLD_ORDERS, UPPER = (uuid.UUID(int=n) for n in (11, 12, 13, 14))


def regex_heartbeat(s: Shard, member_id: str, regex: str):
    request = HeartbeatRequest("g", member_id, 0, None, None, 30_000, None, regex, None,
                               None, "client", "/127.0.0.1")
    replies = []
    s.runtime.write(TP, lambda sh, now: sh.consumer_group_heartbeat(now, request),
                    replies.append, s.now)
    return replies[0]


def regex_shard() -> Shard:
    s = Shard()
    s.topics = {"orders": (ORDERS, 1), "orders-eu": (ORDERS_EU, 1),
                "old-orders": (OLD_ORDERS, 1), "ORDERS": (UPPER, 1)}
    return s


def assigned_topics(response) -> set[uuid.UUID]:
    return {tp["topic_id"] for tp in response["assignment"]["topic_partitions"]}


@pytest.mark.parametrize(("regex", "topics"), [
    (r"orders.*", {ORDERS, ORDERS_EU}),  # the whole name: not old-orders
    (r"orders", {ORDERS}),
    (r"(?i)orders", {ORDERS, UPPER}),
    (r"[[:lower:]]+", {ORDERS}),  # a POSIX class; Python's re reads "[[:lower:]" + "]"
    (r"\pL+", {ORDERS, UPPER}),  # Unicode classes; Python's re has none
    (r"\Qorders-eu\E", {ORDERS_EU}),  # quoting; Python's re has none
    (r"old-(?i)ORDERS", {OLD_ORDERS}),  # flags mid-pattern; Python's re refuses them
    (r"orders\z", {ORDERS}),
    (r"(?P<name>orders)|(?<other>ORDERS)", {ORDERS, UPPER}),
])
def test_subscribed_topic_regex_matches_as_re2j(regex: str, topics: set) -> None:
    r = regex_heartbeat(regex_shard(), "a", regex)
    assert r["error_code"] == E.none, r["error_message"]
    assert assigned_topics(r) == topics


@pytest.mark.parametrize("regex", [
    r"(o)\1rders",  # a backreference
    r"orders(?=-eu)",  # lookahead
    r"(?<=old-)orders",  # lookbehind
    r"orders++",  # possessive
    r"(?>orders)",  # atomic group
    r"orders\Z",
    r"(?x) orders",  # verbose
    r"orders{1001}",
    r"orders\C*",  # RE2 has \C (any byte), RE2/J does not (nor Python's re)
])
def test_regexes_re2j_refuses_are_invalid_regular_expression(regex: str) -> None:
    if "\\C" not in regex:
        re.compile(regex)  # the point: Python's re takes them, and matched them before
    s = regex_shard()
    r = regex_heartbeat(s, "a", regex)
    assert r["error_code"] == E.invalid_regular_expression == 128
    assert r["error_message"].startswith(
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression: ")
    assert "g" not in s.runtime.active(TP).shard.groups  # nothing was written


def test_a_stored_regex_that_no_longer_compiles_selects_nothing() -> None:
    assert topics_matching(r"(o)\1rders", ["orders", "oorders"]) == []
    assert topics_matching(r"o.*", ["orders", "old-orders", "eu-orders"]) == \
        ["orders", "old-orders"]
