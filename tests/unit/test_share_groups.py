"""Share groups (KIP-932) on the group coordinator shard: the simple assignor, joins and
heartbeats with member epochs, leaving, session timeouts, ShareGroupDescribe, ListGroups
and DeleteGroups, group types that do not mix, and a reload from the records."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from ottla.coordinator.group import records as rec
from ottla.coordinator.group.consumer_protocol import HeartbeatRequest
from ottla.coordinator.group.shard import GroupConfig, GroupCoordinatorShard, JoinRequest
from ottla.coordinator.group.share_group import ShareGroup, ShareGroupConfig, simple_assign
from ottla.coordinator.group.share_group_manager import ShareHeartbeatRequest
from ottla.coordinator.runtime import CoordinatorRuntime
from ottla.protocol.errors import ErrorCode as E
from ottla.protocol.errors import KafkaError
from tests.unit.test_group_coordinator import TP, MemoryPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


# --- the simple assignor ---------------------------------------------------------------------

def sizes(result: dict) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def sharing(result: dict) -> Counter:
    return Counter((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def test_more_members_than_partitions_share_each_partition() -> None:
    members = {f"m{i}": frozenset({T1}) for i in range(5)}
    result = simple_assign(members, {T1: 2}, {})
    assert sizes(result) == [1] * 5  # every member gets a partition
    assert sorted(sharing(result).values()) == [2, 3]  # each shared, evenly


def test_fewer_members_than_partitions_balance_within_one_and_stick() -> None:
    members = {"a": frozenset({T1}), "b": frozenset({T1})}
    first = simple_assign(members, {T1: 5}, {})
    assert sizes(first) == [2, 3] and set(sharing(first).values()) == {1}
    second = simple_assign({**members, "c": frozenset({T1})}, {T1: 5}, first)
    assert sizes(second) == [1, 2, 2] and len(sharing(second)) == 5
    for m in ("a", "b"):
        assert second[m][T1] <= first[m][T1]  # nobody gets a partition another gave up


def test_heterogeneous_subscriptions_get_only_their_topics() -> None:
    result = simple_assign({"a": frozenset({T1}), "b": frozenset({T1, T2})},
                           {T1: 1, T2: 3}, {})
    assert result["a"] == {T1: {0}}
    assert result["b"] == {T1: {0}, T2: {0, 1, 2}}


# --- the shard -------------------------------------------------------------------------------

class Shard:
    def __init__(self, **share: Any) -> None:
        self.partition = MemoryPartition()
        self.topics: dict[str, tuple[uuid.UUID, int]] = {"orders": (T1, 2)}
        self.share_config = ShareGroupConfig(**share)
        self.runtime = CoordinatorRuntime(self.partition, self.factory)
        self.now = 1_000_000
        self.runtime.load(TP, self.now)

    def factory(self, ctx):
        return GroupCoordinatorShard(ctx, GroupConfig(initial_rebalance_delay_ms=0),
                                     topics=lambda: self.topics, share_config=self.share_config)

    def write(self, op) -> Any:
        replies: list[Any] = []
        self.runtime.write(TP, op, replies.append, self.now)
        return replies[0]

    def heartbeat(self, member_id: str, epoch: int, topics: tuple[str, ...] | None = None,
                  group: str = "g") -> dict[str, Any]:
        if topics is None and epoch == 0:
            topics = ("orders",)
        request = ShareHeartbeatRequest(group, member_id, epoch, None, topics, "client",
                                        "/127.0.0.1")
        return self.write(lambda s, now: s.share_group_heartbeat(now, request))

    def describe(self, group: str = "g", runtime: CoordinatorRuntime | None = None
                 ) -> dict[str, Any]:
        return (runtime or self.runtime).read(TP, lambda s: s.describe_share_group(group))

    def advance(self, ms: int) -> None:
        self.now += ms
        self.runtime.poll(self.now)


def assigned(response: dict[str, Any]) -> set[int]:
    return {p for tp in response["assignment"]["topic_partitions"] for p in tp["partitions"]}


def test_join_assigns_and_members_move_to_the_new_epoch() -> None:
    s = Shard()
    a = s.heartbeat("a", 0)
    assert (a["error_code"], a["member_id"], a["member_epoch"], assigned(a)) == \
        (E.none, "a", 1, {0, 1})
    assert a["heartbeat_interval"] == 5000
    b = s.heartbeat("b", 0)
    assert (b["member_epoch"], len(assigned(b))) == (2, 1)  # no waiting for a to revoke
    a = s.heartbeat("a", 1)
    assert a["member_epoch"] == 2 and assigned(a) == {0, 1} - assigned(b)
    assert s.heartbeat("a", 2)["assignment"] is None  # unchanged: not sent again


def test_a_member_id_the_client_leaves_empty_is_chosen_by_the_server() -> None:
    r = Shard().heartbeat("", 0)
    assert r["error_code"] == E.none and uuid.UUID(r["member_id"])


def test_eight_members_on_two_partitions_all_get_one() -> None:
    s = Shard()
    for i in range(8):
        s.heartbeat(f"m{i}", 0)
    epoch = s.describe()["group_epoch"]
    answers = [s.heartbeat(f"m{i}", s.describe()["members"][i]["member_epoch"])
               for i in range(8)]
    assert all(r["member_epoch"] == epoch for r in answers)
    counts = Counter(p for m in s.describe()["members"]
                     for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"])
    assert counts == {0: 4, 1: 4}


def test_epochs_are_checked_as_kafka_checks_them() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    s.heartbeat("b", 0)
    assert s.heartbeat("a", 7)["error_code"] == E.fenced_member_epoch
    assert s.heartbeat("nobody", 1)["error_code"] == E.unknown_member_id
    assert s.heartbeat("", 1)["error_code"] == E.invalid_request
    assert s.heartbeat("c", 0, topics=())["error_code"] == E.invalid_request
    assert s.heartbeat("a", -2)["error_code"] == E.invalid_request
    assert s.heartbeat("a", 1)["member_epoch"] == 2  # 1 is a's previous epoch: accepted
    assert s.heartbeat("x", 1, group="nothing")["error_code"] == E.group_id_not_found


def test_group_share_max_size() -> None:
    s = Shard(max_size=2)
    s.heartbeat("a", 0)
    s.heartbeat("b", 0)
    assert s.heartbeat("c", 0)["error_code"] == E.group_max_size_reached
    assert s.heartbeat("a", 1)["error_code"] == E.none  # members still heartbeat


def test_leaving_gives_the_partitions_to_the_others() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    s.heartbeat("b", 0)
    s.heartbeat("a", 1)
    left = s.heartbeat("b", -1)
    assert (left["error_code"], left["member_epoch"]) == (E.none, -1)
    a = s.heartbeat("a", 2)
    assert (a["member_epoch"], assigned(a)) == (3, {0, 1})
    s.heartbeat("a", -1)
    assert s.describe()["group_state"] == "Empty"
    assert s.heartbeat("a", 3)["error_code"] == E.unknown_member_id


def test_a_silent_member_is_fenced_after_the_session_timeout() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    s.heartbeat("b", 0)
    for _ in range(3):  # a heartbeats, b is silent
        s.advance(20_000)
        s.heartbeat("a", s.describe()["members"][0]["member_epoch"])
    members = s.describe()["members"]
    assert [m["member_id"] for m in members] == ["a"]
    assert s.heartbeat("b", 2)["error_code"] == E.unknown_member_id
    assert members[0]["assignment"]["topic_partitions"][0]["partitions"] == [0, 1]


def test_a_group_session_timeout_override_is_obeyed() -> None:
    s = Shard(group_overrides=lambda g: {"share.session.timeout.ms": "50000",
                                         "share.heartbeat.interval.ms": "6000"})
    assert s.heartbeat("a", 0)["heartbeat_interval"] == 6000
    s.advance(46_000)
    assert s.describe()["group_state"] == "Stable"
    s.advance(5_000)
    assert s.describe()["group_state"] == "Empty"


def test_describe_shows_members_and_their_assignments() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    d = s.describe()
    assert (d["group_state"], d["group_epoch"], d["assignment_epoch"], d["assignor_name"]) \
        == ("Stable", 1, 1, "simple")
    (member,) = d["members"]
    assert (member["member_id"], member["member_epoch"], member["client_id"],
            member["subscribed_topic_names"]) == ("a", 1, "client", ["orders"])
    assert member["assignment"]["topic_partitions"] == [
        {"topic_id": T1, "topic_name": "orders", "partitions": [0, 1]}]


def test_new_partitions_reach_the_members() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    s.topics = {"orders": (T1, 3)}
    r = s.heartbeat("a", 1)
    assert (r["member_epoch"], assigned(r)) == (2, {0, 1, 2})


def test_group_types_do_not_mix() -> None:
    s = Shard()
    s.heartbeat("a", 0, group="shared")
    consumer = HeartbeatRequest("shared", "c", 0, None, None, 30_000, ("orders",), None, None,
                                None, "client", "/127.0.0.1")
    r = s.write(lambda sh, now: sh.consumer_group_heartbeat(now, consumer))
    assert r["error_code"] == E.group_id_not_found
    join = JoinRequest("shared", "", None, "consumer", [("range", b"")], 10_000, 10_000, "c",
                       "/127.0.0.1", 9)
    replies: list[Any] = []
    s.runtime.write(TP, lambda sh, now: sh.join_group(now, join, replies.append),
                    replies.append, s.now)
    assert replies[0]["error_code"] == E.inconsistent_group_protocol
    commit = s.write(lambda sh, now: sh.commit_offsets(now, "shared", 1, "a", None,
                                                       [("orders", 0, 5, -1, "")], 9))
    assert commit[("orders", 0)] == E.group_id_not_found
    assert isinstance(s.runtime.active(TP).shard.groups["shared"], ShareGroup)
    # ... and the reverse: a consumer group's id is not a share group's.
    consumer = HeartbeatRequest("consumers", "c", 0, None, None, 30_000, ("orders",), None,
                                None, None, "client", "/127.0.0.1")
    s.write(lambda sh, now: sh.consumer_group_heartbeat(now, consumer))
    assert s.heartbeat("a", 0, group="consumers")["error_code"] == E.group_id_not_found
    try:
        s.describe("consumers")
        raise AssertionError("a consumer group described as a share group")
    except KafkaError as e:
        assert e.code == E.group_id_not_found


def test_list_groups_and_delete_an_empty_share_group() -> None:
    s = Shard()
    s.heartbeat("a", 0)
    listed = s.runtime.read(TP, lambda sh: sh.list_groups(set(), {"share"}))
    assert listed == [{"group_id": "g", "protocol_type": "share", "group_state": "Stable",
                       "group_type": "share"}]
    assert s.runtime.read(TP, lambda sh: sh.list_groups({"empty"}, set())) == []
    assert s.write(lambda sh, now: sh.delete_groups(now, ["g"]))["g"] == E.non_empty_group
    s.heartbeat("a", -1)
    assert s.runtime.read(TP, lambda sh: sh.list_groups({"empty"}, {"share"}))[0][
        "group_id"] == "g"
    assert s.write(lambda sh, now: sh.delete_groups(now, ["g"]))["g"] == E.none
    assert s.runtime.read(TP, lambda sh: sh.list_groups(set(), set())) == []
    reloaded = CoordinatorRuntime(s.partition, s.factory)
    reloaded.load(TP, s.now)
    assert "g" not in reloaded.active(TP).shard.groups


def test_a_reload_from_the_records_rebuilds_the_group_and_its_sessions() -> None:
    s = Shard()
    for m in ("a", "b", "c"):
        s.heartbeat(m, 0)
    s.heartbeat("a", 1)
    s.heartbeat("b", 2)
    keys = {type(rec.decode(k, v).key).__name__ for k, v in s.partition.entries}
    assert keys == {"ShareGroupMetadataKey", "ShareGroupMemberMetadataKey",
                    "ShareGroupTargetAssignmentMetadataKey",
                    "ShareGroupTargetAssignmentMemberKey",
                    "ShareGroupCurrentMemberAssignmentKey"}
    reloaded = CoordinatorRuntime(s.partition, s.factory)
    reloaded.load(TP, s.now)
    live = s.runtime.active(TP).shard.groups["g"]
    again = reloaded.active(TP).shard.groups["g"]
    assert again == live
    assert s.describe(runtime=reloaded) == s.describe()
    # The new coordinator times the loaded members out too.
    reloaded.poll(s.now + 46_000)
    assert reloaded.active(TP).shard.groups["g"].members == {}
