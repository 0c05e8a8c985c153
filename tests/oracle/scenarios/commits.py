"""OffsetCommit, OffsetFetch and OffsetDelete edge cases: unknown topics and partitions,
empty and unknown groups, metadata too large, a pending transactional commit under
require_stable, and deleting the offsets of a topic a member is subscribed to."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Json, scenario
from tests.oracle.scenarios.common import init_producer_id, topics_by_name
from tests.oracle.scenarios.groups import consumer_heartbeat, join
from tests.oracle.target import Target


def commit(t: Target, group: str, offsets: dict[tuple[str, int], int], *,
           generation: int = -1, member: str = "", metadata: str = "") -> dict[str, Any]:
    """OffsetCommit v9 of {(topic, partition): offset} (generation -1, member "": a
    commit from outside the group, as kafka-consumer-groups --reset-offsets makes)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset,
            "committed_leader_epoch": -1, "committed_metadata": metadata})
    return t.request(ApiKey.OFFSET_COMMIT, 9, {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None,
        "topics": [{"name": n, "partitions": p} for n, p in topics.items()]})


def fetch_offsets(t: Target, group: str, topics: dict[str, list[int]] | None,
                  require_stable: bool = False) -> dict[str, Any]:
    """OffsetFetch v9 for one group: ``topics`` None asks for every committed offset."""
    return t.request(ApiKey.OFFSET_FETCH, 9, {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                    "topics": None if topics is None else [
                        {"name": n, "partition_indexes": p} for n, p in topics.items()]}],
        "require_stable": require_stable})


def delete_offsets(t: Target, group: str, topics: dict[str, list[int]]) -> dict[str, Any]:
    """OffsetDelete v0; the answer's topics keyed by name (Kafka's order is a hash map's)."""
    response = t.request(ApiKey.OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": n, "partitions": [{"partition_index": p} for p in ps]}
        for n, ps in topics.items()]})
    return topics_by_name(response)


@scenario("Offsets", ci=True)
def offset_commit_edges(t: Target) -> Json:
    """OffsetCommit v9 from outside any group to a new group (it becomes an empty group),
    to an unknown topic and partition, with metadata over offset.metadata.max.bytes, and
    with a generation and member the empty group does not have; OffsetFetch v9 of it all,
    of every offset (topics null), of an unknown group, of an unknown topic."""
    a = t.topic("a")
    t.create_topic(a, 2)
    group = t.group("g")
    t.find_coordinator(group)
    r: dict[str, Json] = {}
    r["commit_new_group"] = commit(t, group, {(a, 0): 5, (a, 1): 7})
    r["commit_unknown_topic"] = commit(t, group, {(t.topic("nope"), 0): 1})
    r["commit_unknown_partition"] = commit(t, group, {(a, 9): 1})
    r["commit_negative_offset"] = commit(t, group, {(a, 0): -3})
    r["commit_metadata_too_large"] = commit(t, group, {(a, 1): 8}, metadata="m" * 5000)
    r["commit_with_generation_to_empty_group"] = commit(t, group, {(a, 0): 6}, generation=3,
                                                        member="no-such-member")
    r["fetch"] = fetch_offsets(t, group, {a: [0, 1, 2], t.topic("nope"): [0]})
    r["fetch_all"] = fetch_offsets(t, group, None)
    r["fetch_unknown_group"] = fetch_offsets(t, t.group("nobody"), {a: [0]})
    r["fetch_unknown_group_all"] = fetch_offsets(t, t.group("nobody"), None)
    r["describe_group"] = t.request(ApiKey.DESCRIBE_GROUPS, 5, {
        "groups": [group], "include_authorized_operations": False})
    return r


@scenario("Offsets")
def offset_fetch_require_stable(t: Target) -> Json:
    """A transactional producer commits offsets for a group inside an open transaction
    (AddOffsetsToTxn, TxnOffsetCommit): OffsetFetch v9 with and without require_stable;
    then after the transaction commits."""
    a, group, txn = t.topic("a"), t.group("g"), t.topic("txn")
    t.create_topic(a, 1)
    t.find_coordinator(group)
    r: dict[str, Json] = {"commit": commit(t, group, {(a, 0): 1})}
    init = init_producer_id(t, txn)
    pid, epoch = init["producer_id"], init["producer_epoch"]
    r["add_offsets"] = t.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, {
        "transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
        "group_id": group})
    r["txn_offset_commit"] = t.request(ApiKey.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": txn, "group_id": group, "producer_id": pid,
        "producer_epoch": epoch, "generation_id": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": a, "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
             "committed_metadata": "txn"}]}]})
    r["fetch_pending"] = fetch_offsets(t, group, {a: [0]})
    r["fetch_pending_require_stable"] = fetch_offsets(t, group, {a: [0]}, require_stable=True)
    r["end_txn"] = t.request(ApiKey.END_TXN, 3, {
        "transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
        "committed": True})

    def stable() -> dict[str, Any] | None:
        """Until the commit's marker reaches the offsets topic (Kafka writes it after
        answering EndTxn)."""
        response = fetch_offsets(t, group, {a: [0]}, require_stable=True)
        partition = response["groups"][0]["topics"][0]["partitions"][0]
        return response if partition["error_code"] == "NONE" else None
    r["fetch_committed_require_stable"] = wait_until(stable, 30, 0.05,
                                                     f"{t.side}: the offsets' marker")
    return r


@scenario("Offsets", ci=True)
def offset_delete_edges(t: Target) -> Json:
    """OffsetDelete v0: from an empty group (offsets of two topics), of an unknown group,
    an unknown topic; from a KIP-848 group whose member subscribes to one of the topics
    (GROUP_SUBSCRIBED_TO_TOPIC for it, deleted for the other); from a classic group with
    a member of a non-consumer protocol (NON_EMPTY_GROUP); OffsetFetch afterwards."""
    a, b = t.topic("a"), t.topic("b")
    t.create_topic(a, 1)
    t.create_topic(b, 1)
    empty, subscribed, classic = t.group("empty"), t.group("subscribed"), t.group("classic")
    for group in (empty, subscribed, classic):
        t.find_coordinator(group)
    r: dict[str, Json] = {}
    r["commit_empty"] = commit(t, empty, {(a, 0): 1, (b, 0): 2})
    r["delete_from_empty_group"] = delete_offsets(t, empty, {a: [0], t.topic("nope"): [0]})
    r["fetch_empty_after"] = fetch_offsets(t, empty, None)
    r["delete_unknown_group"] = delete_offsets(t, t.group("nobody"), {a: [0]})
    member = "oracle-offsets-member"
    joined = consumer_heartbeat(t, subscribed, member, 0, [a])
    r["member_joined"] = joined["error_code"]
    r["commit_by_member"] = commit(t, subscribed, {(a, 0): 3, (b, 0): 4},
                                   generation=joined["member_epoch"], member=member)
    r["delete_subscribed_topic"] = delete_offsets(t, subscribed, {a: [0], b: [0]})
    r["fetch_subscribed_after"] = fetch_offsets(t, subscribed, None)
    first = join(t, classic, "")
    joined_classic = join(t, classic, first["member_id"])
    r["classic_joined"] = joined_classic["error_code"]
    r["commit_classic"] = commit(t, classic, {(a, 0): 5})
    r["delete_from_non_consumer_classic_group"] = delete_offsets(t, classic, {a: [0]})
    r["leave"] = consumer_heartbeat(t, subscribed, member, -1)
    return r
