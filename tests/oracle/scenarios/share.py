"""Share groups (KIP-932): ShareAcknowledge's errors (records never acquired or already
acknowledged, a wrong session epoch, an unknown member, epoch 0) around a member that
joined with ShareGroupHeartbeat and acquired records with ShareFetch, and the start
offset the share coordinator stores after each acknowledgement."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import MISSING, Expect, Json, scenario
from tests.oracle.scenarios.common import topic_id
from tests.oracle.target import Target

ACCEPT, RELEASE, REJECT = 1, 2, 3
GROUP_RESOURCE = 32


def share_heartbeat(t: Target, group: str, member: str, epoch: int,
                    topics: list[str] | None = None) -> dict[str, Any]:
    return t.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": topics})


def batches(*acks: tuple[int, int, int]) -> list[dict[str, Any]]:
    """(first offset, last offset, acknowledge type) as acknowledgement batches."""
    return [{"first_offset": a, "last_offset": b, "acknowledge_types": [kind]}
            for a, b, kind in acks]


class Session:
    """One member's share session on one partition: the epoch it must send next (0 opens
    the session; every request the broker accepts moves it on)."""

    def __init__(self, t: Target, group: str, member: str, topic: str) -> None:
        self.t, self.group, self.member = t, group, member
        self.topic_id = topic_id(t, topic)
        self.epoch = 0

    def _advance(self, response: dict[str, Any]) -> dict[str, Any]:
        if response.get("error_code") == "NONE":
            self.epoch += 1
        return response

    def fetch(self, acks: list[dict[str, Any]] | None = None, max_wait: int = 500,
              epoch: int | None = None) -> dict[str, Any]:
        response = self.t.request(ApiKey.SHARE_FETCH, 1, {
            "group_id": self.group, "member_id": self.member,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500,
            "batch_size": 500, "forgotten_topics_data": [],
            "topics": [{"topic_id": self.topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": acks or []}]}]})
        return self._advance(response) if epoch is None else response

    def acknowledge(self, acks: list[dict[str, Any]], *, epoch: int | None = None,
                    member: str | None = None, partition: int = 0) -> dict[str, Any]:
        response = self.t.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
            "group_id": self.group, "member_id": member or self.member,
            "share_session_epoch": self.epoch if epoch is None else epoch,
            "topics": [{"topic_id": self.topic_id, "partitions": [
                {"partition_index": partition, "acknowledgement_batches": acks}]}]})
        return self._advance(response) if epoch is None and member is None else response


def acquired(response: dict[str, Any]) -> list[Any]:
    return [r for topic in response.get("responses", []) for p in topic["partitions"]
            for r in p["acquired_records"]]


EPOCHS = ("member epochs are opaque counters a member echoes; Kafka 4.4 bumps the group "
          "epoch for the member, then for the assignment it computes later")
SHARE_EXPECT = (
    Expect("join/member_epoch", EPOCHS, kafka=2, ottla=1),
    Expect("assigned/member_epoch", EPOCHS, kafka=3, ottla=1),
    Expect("join/assignment/topic_partitions/0", "Kafka 4.4 computes share assignments "
           "off the heartbeat (group.share.assignment.interval.ms), so a member's first "
           "heartbeat has none and a later one brings it; Ottla assigns in the first. "
           "Members heartbeat until they have one either way", kafka=MISSING),
    Expect("*/current_leader/*", "current_leader only means something with "
           "NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH; without an error Kafka leaves it "
           "at (0, 0) and Ottla sends (-1, -1). Clients read it only on those errors",
           kafka=0, ottla=-1),
)


@scenario("Share group", ci=True, expect=SHARE_EXPECT)
def share_acknowledge_errors(t: Target) -> Json:
    """A member joins a share group (share.auto.offset.reset=earliest) over a partition of
    three records and acquires them; ShareAcknowledge then for records never acquired, a
    wrong session epoch, an unknown member, epoch 0, a partition outside the session,
    one record accepted and accepted again, one released and one rejected; a ShareFetch
    gets the released record back (delivery count 2); the session closes (epoch -1) and
    the member leaves."""
    name, group, member = t.topic("a"), t.group("sg"), "oracle-share-member-1"
    t.create_topic(name, 1)
    answer = t.produce_batch(name, 0, [(None, b"r0"), (None, b"r1"), (None, b"r2")],
                             timestamp=t.now)
    assert answer["error_code"] == "NONE", answer
    configured = t.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
        "validate_only": False})
    t.find_coordinator(group)
    r: dict[str, Json] = {"group_config": configured}
    joined = share_heartbeat(t, group, member, 0, [name])
    r["join"] = joined

    def assigned() -> dict[str, Any] | None:
        response = share_heartbeat(t, group, member, joined["member_epoch"])
        parts = (response.get("assignment") or {}).get("topic_partitions") or []
        return response if parts else None
    r["assigned"] = (joined if (joined.get("assignment") or {}).get("topic_partitions")
                     else wait_until(assigned, 30, 0.2, f"{t.side}: a share assignment"))
    session = Session(t, group, member, name)
    first = wait_until(lambda: (lambda f: f if acquired(f) else None)(session.fetch()), 30,
                       0.1, f"{t.side}: records acquired")
    r["fetch_acquires"] = first
    r["ack_not_acquired"] = session.acknowledge(batches((10, 12, ACCEPT)))
    r["ack_wrong_epoch"] = session.acknowledge(batches((0, 0, ACCEPT)),
                                               epoch=session.epoch + 50)
    r["ack_unknown_member"] = session.acknowledge(batches((0, 0, ACCEPT)),
                                                  member="oracle-share-nobody")
    r["ack_epoch_0"] = session.acknowledge(batches((0, 0, ACCEPT)), epoch=0)
    r["ack_other_partition"] = session.acknowledge(batches((0, 0, ACCEPT)), partition=3)
    r["ack_accept"] = session.acknowledge(batches((0, 0, ACCEPT)))
    r["ack_accept_again"] = session.acknowledge(batches((0, 0, ACCEPT)))
    r["ack_release_and_reject"] = session.acknowledge(batches((1, 1, RELEASE),
                                                              (2, 2, REJECT)))
    r["fetch_gets_released_record"] = wait_until(
        lambda: (lambda f: f if acquired(f) else None)(session.fetch()), 30, 0.1,
        f"{t.side}: the released record again")
    r["close_session"] = session.fetch(epoch=-1, acks=batches((1, 1, ACCEPT)), max_wait=0)
    r["leave"] = share_heartbeat(t, group, member, -1)
    return r



def stored_start(t: Target, group: str, tid: Any) -> Json:
    """What the share coordinator stores for partition 0: its start offset and KIP-1226
    delivery-complete count (ReadShareGroupStateSummary)."""
    response = t.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
        "group_id": group, "topics": [{"topic_id": tid, "partitions": [
            {"partition": 0, "leader_epoch": -1}]}]})
    result = response["results"][0]["partitions"][0]
    return {k: result[k] for k in ("error_code", "start_offset", "delivery_complete_count")}


@scenario("Share group", ci=True)
def share_stored_start_offset(t: Target) -> Json:
    """A member acquires six records and accepts 0-2, then 3, then 5: after each
    ShareAcknowledge, the start offset and delivery-complete count the share coordinator
    stores. A write carries the start offset as it was before the acknowledgement (it
    moves once the write succeeded, and the next write carries it), with the count of
    the records settled above it: 0/3, then 3/1, then 4/1."""
    name, group, member = t.topic("a"), t.group("sg"), "oracle-share-member-2"
    t.create_topic(name, 1)
    answer = t.produce_batch(name, 0, [(None, b"r%d" % i) for i in range(6)],
                             timestamp=t.now)
    assert answer["error_code"] == "NONE", answer
    t.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": [
            {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
        "validate_only": False})
    t.find_coordinator(group)
    joined = share_heartbeat(t, group, member, 0, [name])

    def assigned() -> dict[str, Any] | None:
        response = share_heartbeat(t, group, member, joined["member_epoch"])
        parts = (response.get("assignment") or {}).get("topic_partitions") or []
        return response if parts else None
    if not (joined.get("assignment") or {}).get("topic_partitions"):
        wait_until(assigned, 30, 0.2, f"{t.side}: a share assignment")
    session = Session(t, group, member, name)
    got = wait_until(lambda: (lambda f: f if acquired(f) else None)(session.fetch()), 30,
                     0.1, f"{t.side}: records acquired")
    tid = topic_id(t, name)
    r: dict[str, Json] = {"acquired": acquired(got)}
    for label, first, last in (("0-2", 0, 2), ("3", 3, 3), ("5", 5, 5)):
        acked = session.acknowledge(batches((first, last, ACCEPT)))
        r[f"accept {label}"] = {
            "error_code": acked["error_code"],
            "partition_error": acked["responses"][0]["partitions"][0]["error_code"],
            "stored": stored_start(t, group, tid)}
    r["leave"] = share_heartbeat(t, group, member, -1)["error_code"]
    return r
