"""The group protocols' errors: classic JoinGroup, SyncGroup, Heartbeat and LeaveGroup
with unknown members, illegal generations and a rebalance in progress; the KIP-848
ConsumerGroupHeartbeat with a fenced member epoch and an unknown member."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Expect, Json, scenario
from tests.oracle.target import Target

PROTOCOL = {"protocol_type": "oracle", "protocols": [{"name": "p", "metadata": b"m"}]}
"""Not "consumer": the coordinators parse a consumer protocol's metadata, which is beside
the point here."""
TIMEOUTS = {"session_timeout": 10000, "rebalance_timeout": 10000}


def join(t: Target, group: str, member_id: str, client: Any = None) -> dict[str, Any]:
    body = {"group_id": group, "member_id": member_id, "group_instance_id": None,
            "reason": None, **TIMEOUTS, **PROTOCOL}
    if client is None:
        return t.request(ApiKey.JOIN_GROUP, 9, body)
    Target.send(client, ApiKey.JOIN_GROUP, 9, body)
    return {}


def sync(t: Target, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes] | None = None) -> dict[str, Any]:
    return t.request(ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": generation, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "oracle", "protocol_name": "p",
        "assignments": [{"member_id": m, "assignment": a}
                        for m, a in (assignments or {}).items()]})


def group_state(t: Target, group: str) -> str:
    described = t.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group],
                                                       "include_authorized_operations": False})
    return described["groups"][0]["group_state"]


def heartbeat(t: Target, group: str, generation: int, member_id: str) -> dict[str, Any]:
    return t.request(ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": generation,
                                            "member_id": member_id,
                                            "group_instance_id": None})


def leave(t: Target, group: str, *member_ids: str) -> dict[str, Any]:
    return t.request(ApiKey.LEAVE_GROUP, 5, {"group_id": group, "members": [
        {"member_id": m, "group_instance_id": None, "reason": None} for m in member_ids]})


@scenario("Classic group", ci=True)
def classic_group_errors(t: Target) -> Json:
    """A classic group through its life, with every error on the way: JoinGroup of an
    unknown member id, the MEMBER_ID_REQUIRED round trip, the join and sync of a leader,
    Heartbeat and SyncGroup with an unknown member and an illegal generation; then a
    second member's join puts the group in a rebalance (Heartbeat and SyncGroup answer
    REBALANCE_IN_PROGRESS) until the leader rejoins; LeaveGroup of an unknown member and of
    both."""
    group = t.group("g")
    t.find_coordinator(group)
    r: dict[str, Json] = {}
    r["join_unknown_member"] = join(t, group, "no-such-member")
    first = join(t, group, "")
    r["join_without_member_id"] = first
    a = first["member_id"]
    joined = join(t, group, a)
    r["join"] = joined
    generation = joined["generation_id"]
    r["sync_unknown_member"] = sync(t, group, generation, "no-such-member")
    r["sync_illegal_generation"] = sync(t, group, generation + 5, a)
    r["sync"] = sync(t, group, generation, a, {a: b"assigned-a"})
    r["heartbeat"] = heartbeat(t, group, generation, a)
    r["heartbeat_unknown_member"] = heartbeat(t, group, generation, "no-such-member")
    r["heartbeat_illegal_generation"] = heartbeat(t, group, generation + 5, a)
    r["heartbeat_old_generation"] = heartbeat(t, group, generation - 1, a)
    second = join(t, group, "")
    r["second_join_without_member_id"] = second
    b = second["member_id"]
    with t.wire() as other:
        join(t, group, b, client=other)  # parked until the leader rejoins
        wait_until(lambda: group_state(t, group) == "PreparingRebalance", 30, 0.05,
                   f"{t.side}: {group} rebalancing")
        r["heartbeat_during_rebalance"] = heartbeat(t, group, generation, a)
        r["sync_during_rebalance"] = sync(t, group, generation, a, {a: b"x"})
        rejoined = join(t, group, a)
        names = {a: "first", b: "second"}  # the members' order is a hash map's
        r["leader_rejoins"] = {**rejoined, "members": {
            names.get(m["member_id"], m["member_id"]): m for m in rejoined["members"]}}
        r["second_joined"] = t.to_json(Target.receive(other, ApiKey.JOIN_GROUP, 9))
    r["heartbeat_previous_generation"] = heartbeat(t, group, generation, a)
    r["leave_unknown_member"] = leave(t, group, "no-such-member")
    r["leave_both"] = leave(t, group, a, b)
    r["heartbeat_after_leaving"] = heartbeat(t, group, rejoined["generation_id"], a)
    r["join_unknown_group_member"] = join(t, t.group("empty"), "no-such-member")
    return r


def consumer_heartbeat(t: Target, group: str, member_id: str, epoch: int,
                       topics: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return t.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member_id, "member_epoch": epoch,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 30000,
        "subscribed_topic_names": topics, "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": [] if epoch == 0 else None, **extra})


@scenario("Consumer group (KIP-848)", ci=True, expect=(
    Expect("join/member_epoch", "member epochs are opaque counters a client echoes: "
           "Kafka 4.4 bumps the group epoch twice for a first member (its subscription, "
           "then the subscribed topics' metadata), Ottla once", kafka=2, ottla=1),))
def consumer_group_heartbeat_errors(t: Target) -> Json:
    """ConsumerGroupHeartbeat v1: a member joins (epoch 0) a topic of two partitions; then
    heartbeats with a fenced epoch (above its own), a negative one, an unknown member id,
    a join without a subscription, an empty member id, a group that does not exist; the
    member leaves (epoch -1) and heartbeats again; and a KIP-848 member tries a group
    that is a classic one."""
    topic = t.topic("a")
    t.create_topic(topic, 2)
    group = t.group("g")
    t.find_coordinator(group)
    member = "oracle-member-0001"
    r: dict[str, Json] = {}
    joined = consumer_heartbeat(t, group, member, 0, [topic])
    r["join"] = joined
    epoch = joined["member_epoch"]
    r["fenced_epoch_above"] = consumer_heartbeat(t, group, member, epoch + 10)
    r["negative_epoch"] = consumer_heartbeat(t, group, member, -5)
    r["unknown_member"] = consumer_heartbeat(t, group, "oracle-member-9999", epoch)
    r["join_without_subscription"] = consumer_heartbeat(t, group, "oracle-member-0002", 0)
    r["empty_member_id"] = consumer_heartbeat(t, group, "", 0, [topic])
    r["unknown_group"] = consumer_heartbeat(t, t.group("nope"), member, 3)
    r["leave"] = consumer_heartbeat(t, group, member, -1)
    r["after_leaving"] = consumer_heartbeat(t, group, member, epoch)
    classic = t.group("classic")
    t.find_coordinator(classic)
    first = join(t, classic, "")
    joined_classic = join(t, classic, first["member_id"])
    r["classic_group_joined"] = joined_classic["error_code"]
    r["kip848_member_in_classic_group"] = consumer_heartbeat(t, classic, member, 0, [topic])
    return r
