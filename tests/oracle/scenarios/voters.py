"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853) refused before the leader's
own checks, on the controller listener: another cluster id, no valid voter (a negative id
or no directory id), no endpoint for the quorum's listener, a stale or future epoch, a
kraft.version range that is no range. Kafka's KafkaRaftClient answers these the same on
its dynamic quorum (kraft.version 1) as Ottla's static one (0); the refusals that depend
on the voter set (a duplicate, a voter not found, a change in flight) are in
tests/unit/test_raft_voter_changes.py and tests/integration/test_dynamic_quorum.py."""

from __future__ import annotations

import re
from typing import Any

from ottla.protocol.api import ApiKey
from tests.oracle.model import Json, Normalise, scenario
from tests.oracle.target import Target

DIRECTORY = "00000000-0000-0000-0000-000000000007"
ZERO = "00000000-0000-0000-0000-000000000000"
CONTROLLER = [{"name": "CONTROLLER", "host": "localhost", "port": 19093}]
PLAINTEXT = [{"name": "plaintext", "host": "localhost", "port": 19092}]


def own_cluster_id(value: Json) -> Json:
    """A message naming the node's own cluster id (each node has its own)."""
    if not isinstance(value, str):
        return value
    return re.sub(r'cluster id "[^"]*"', 'cluster id "<own>"', value)


def answer(response: dict[str, Any]) -> Json:
    return [response.get("error_code"), response.get("error_message")]


def add(t: Target, **fields: Any) -> Json:
    body = {"cluster_id": None, "timeout": 5000, "voter_id": 2,
            "voter_directory_id": DIRECTORY, "ack_when_committed": True,
            "listeners": CONTROLLER, **fields}
    return answer(t.request(ApiKey.ADD_RAFT_VOTER, 1, body, controller=True))


def remove(t: Target, **fields: Any) -> Json:
    body = {"cluster_id": None, "voter_id": 2, "voter_directory_id": DIRECTORY, **fields}
    return answer(t.request(ApiKey.REMOVE_RAFT_VOTER, 0, body, controller=True))


def update(t: Target, epoch: int, **fields: Any) -> Json:
    """UpdateRaftVoter's error (it has no message; the leader it names differs in host
    and port)."""
    body = {"cluster_id": None, "current_leader_epoch": epoch, "voter_id": 1,
            "voter_directory_id": DIRECTORY, "listeners": CONTROLLER,
            "k_raft_version_feature": {"min_supported_version": 0,
                                       "max_supported_version": 1}, **fields}
    return t.request(ApiKey.UPDATE_RAFT_VOTER, 0, body, controller=True).get("error_code")


@scenario("KRaft voters", ci=True, compare_messages=True,
          normalise=(Normalise("*", own_cluster_id, "each node has its own cluster id"),))
def raft_voter_change_refusals(t: Target) -> Json:
    """AddRaftVoter v1 and RemoveRaftVoter v0 refusals, messages included, and
    UpdateRaftVoter's errors, at the leader's epoch (DescribeQuorum) and around it."""
    quorum = t.request(ApiKey.DESCRIBE_QUORUM, 2, {"topics": [{
        "topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        controller=True)
    epoch = quorum["topics"][0]["partitions"][0]["leader_epoch"]
    return {
        "add": {
            "other_cluster": add(t, cluster_id="other-cluster"),
            "negative_id": add(t, voter_id=-1),
            "no_directory": add(t, voter_directory_id=ZERO),
            "no_controller_listener": add(t, listeners=PLAINTEXT),
            "no_listener": add(t, listeners=[]),
        },
        "remove": {
            "other_cluster": remove(t, cluster_id="other-cluster"),
            "negative_id": remove(t, voter_id=-1),
            "no_directory": remove(t, voter_directory_id=ZERO),
        },
        "update": {
            "other_cluster": update(t, epoch, cluster_id="other-cluster"),
            "stale_epoch": update(t, epoch - 1),
            "future_epoch": update(t, epoch + 1),
            "no_directory": update(t, epoch, voter_directory_id=ZERO),
            "no_controller_listener": update(t, epoch, listeners=PLAINTEXT),
            "reversed_versions": update(t, epoch, k_raft_version_feature={
                "min_supported_version": 1, "max_supported_version": 0}),
        },
    }
