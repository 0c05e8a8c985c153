"""CreateTopics, CreatePartitions and DeleteTopics with valid and invalid arguments: the
error codes and, since kafka-topics and AdminClient show them to the user, the messages."""

from __future__ import annotations

import time
from typing import Any

from ottla.protocol.api import ApiKey
from tests.oracle.model import MISSING, Expect, Json, scenario
from tests.oracle.scenarios.common import keyed, metadata, topic_id
from tests.oracle.scenarios.configs import TIERED
from tests.oracle.target import Target

ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def create(t: Target, name: str, partitions: int = 1, rf: int = 1,
           configs: dict[str, str] | None = None, assignments: list[list[int]] | None = None,
           validate_only: bool = False, extra: list[dict[str, Any]] | None = None
           ) -> Json:
    """One CreateTopics v7 request (plus ``extra`` topics in it); each topic's result with
    its configs keyed by name."""
    topic = {"name": name, "num_partitions": partitions, "replication_factor": rf,
             "assignments": [{"partition_index": i, "broker_ids": ids}
                             for i, ids in enumerate(assignments or [])],
             "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
    response = t.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [topic, *(extra or [])], "timeout": 30000, "validate_only": validate_only})
    if "topics" not in response:
        return response
    return [{**r, "configs": None if r["configs"] is None else keyed(r["configs"], "name")}
            for r in response["topics"]]


CREATE_CASES: dict[str, dict[str, Any]] = {
    "valid": {"partitions": 3},
    "bad_name_dollar": {"name": "bad$name"},
    "bad_name_dot": {"name": "."},
    "bad_name_dotdot": {"name": ".."},
    "bad_name_empty": {"name": ""},
    "bad_name_too_long": {"name": "x" * 250},
    "zero_partitions": {"partitions": 0},
    "negative_partitions": {"partitions": -5},
    "too_many_partitions": {"partitions": 20000},
    "replication_factor_3": {"rf": 3},
    "replication_factor_0": {"rf": 0},
    "replication_factor_-2": {"rf": -2},
    "bad_config_value": {"configs": {"retention.ms": "forever"}},
    "unknown_config": {"configs": {"no.such.key": "1"}},
    "bad_cleanup_policy": {"configs": {"cleanup.policy": "bogus"}},
    "bad_max_decompressed_message_bytes": {"configs": {"max.decompressed.message.bytes": "0"}},
    "null_config_value": {"configs": {"retention.ms": None}},
    "min_insync_above_rf": {"configs": {"min.insync.replicas": "2"}},
    "validate_only": {"partitions": 2, "validate_only": True},
    "validate_only_invalid": {"rf": 3, "validate_only": True},
    "assignment_unknown_broker": {"partitions": -1, "rf": -1, "assignments": [[7]]},
    "assignment_and_count": {"partitions": 2, "rf": -1, "assignments": [[1]]},
    "assignment_duplicate_replica": {"partitions": -1, "rf": -1, "assignments": [[1, 1]]},
    "defaults": {"partitions": -1, "rf": -1},
}


MESSAGE = ("an error message's text differs from Kafka 4.4's (kafka-topics and AdminClient "
           "print it to the user)")
CREATED = ("valid", "min_insync_above_rf", "validate_only", "defaults")
"""The cases that create (or would create) a topic: their answer lists its configs."""

CREATE_EXPECT = (
    *[Expect(f"{case}/0/configs/{key}", TIERED, ottla=MISSING) for case in CREATED
      for key in ("remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable",
                  "remote.log.delete.on.disable")],
)


@scenario("CreateTopics", ci=True, compare_messages=True, expect=CREATE_EXPECT)
def create_topics(t: Target) -> Json:
    """CreateTopics v7, one request per case: a valid topic (its configs in the answer),
    bad names, partition counts, replication factors, configs and assignments,
    validate_only, an existing topic, and a name twice in one request."""
    result: dict[str, Json] = {}
    for case, args in CREATE_CASES.items():
        args = dict(args)
        name = args.pop("name", t.topic(case.replace("_", "-")))
        result[case] = create(t, name, **args)
    result["validate_only_created_nothing"] = metadata(t, [t.topic("validate-only")])[
        "topics"][0]["error_code"]
    result["existing"] = create(t, t.topic("valid"), 3)
    twice = t.topic("twice")
    result["same_name_twice"] = create(t, twice, extra=[{
        "name": twice, "num_partitions": 1, "replication_factor": 1, "assignments": [],
        "configs": []}])
    return result


@scenario("CreatePartitions", ci=True, compare_messages=True)
def create_partitions(t: Target) -> Json:
    """CreatePartitions v3: a valid increase, the same count, fewer, an unknown topic,
    validate_only, an assignment naming an unknown broker, too many partitions, and a
    topic twice in one request."""
    name = t.topic("a")
    t.create_topic(name, 3)

    def grow(count: int, topic: str = name, validate_only: bool = False,
             assignments: list[list[int]] | None = None,
             extra: list[dict[str, Any]] | None = None) -> Json:
        return t.request(ApiKey.CREATE_PARTITIONS, 3, {
            "topics": [{"name": topic, "count": count, "assignments": None
                        if assignments is None else [{"broker_ids": a} for a in assignments]},
                       *(extra or [])],
            "timeout": 30000, "validate_only": validate_only})
    return {
        "validate_only": grow(4, validate_only=True),
        "after_validate_only": len(metadata(t, [name])["topics"][0]["partitions"]),
        "to_4": grow(4),
        "same_count": grow(4),
        "fewer": grow(2),
        "unknown_topic": grow(2, t.topic("nope")),
        "invalid_name": grow(2, "bad$name"),
        "unknown_broker": grow(5, assignments=[[7]]),
        "wrong_assignment_count": grow(6, assignments=[[1]]),
        "too_many": grow(30000),
        "twice": grow(5, extra=[{"name": name, "count": 6, "assignments": None}]),
        "partitions_after": len(metadata(t, [name])["topics"][0]["partitions"]),
    }


@scenario("DeleteTopics", ci=True, compare_messages=True)
def delete_topics(t: Target) -> Json:
    """DeleteTopics v6: by name, by id, an unknown name, an unknown id, a name and an id
    both given, neither, a name twice, an invalid name, and the topic gone from Metadata
    afterwards."""
    by_name, by_id = t.topic("by-name"), t.topic("by-id")
    t.create_topic(by_name)
    t.create_topic(by_id)
    the_id = topic_id(t, by_id)

    def delete(*topics: dict[str, Any]) -> Json:
        return t.request(ApiKey.DELETE_TOPICS, 6, {"topics": list(topics),
                                                    "timeout": 30000})
    return {
        "by_name": delete({"name": by_name, "topic_id": ZERO_UUID}),
        "by_id": delete({"name": None, "topic_id": the_id}),
        "unknown_name": delete({"name": t.topic("nope"), "topic_id": ZERO_UUID}),
        "unknown_id": delete({"name": None, "topic_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}),
        "name_and_id": delete({"name": t.topic("nope"), "topic_id": the_id}),
        "neither": delete({"name": None, "topic_id": ZERO_UUID}),
        "name_twice": delete({"name": t.topic("nope"), "topic_id": ZERO_UUID},
                             {"name": t.topic("nope"), "topic_id": ZERO_UUID}),
        "invalid_name": delete({"name": "bad$name", "topic_id": ZERO_UUID}),
        "gone": {n: gone(t, n) for n in (by_name, by_id)},
    }


def gone(t: Target, name: str, timeout: float = 15.0) -> Json:
    """Metadata's error for a deleted topic, once the broker has applied the deletion: a
    Kafka broker learns it from the controller a moment after DeleteTopics returns, so
    until then it still lists the topic (NONE)."""
    deadline = time.monotonic() + timeout
    while True:
        error = metadata(t, [name])["topics"][0]["error_code"]
        if error != "NONE" or time.monotonic() > deadline:
            return error
        time.sleep(0.1)
