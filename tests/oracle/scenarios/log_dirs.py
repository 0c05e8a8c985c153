"""AlterReplicaLogDirs on a broker of one log dir: the answer for a replica already in the
dir asked for, a dir the broker does not have, a partition and a topic it does not host,
in v1 and v2; and DescribeLogDirs of the partitions afterwards (nothing moved)."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Json, scenario
from tests.oracle.target import Target


def alter(t: Target, version: int, dirs: dict[str, list[tuple[str, list[int]]]]) -> Json:
    """The errors keyed ``topic-partition``, sorted (the order of the answer's topics is
    a Java map's)."""
    response = t.request(ApiKey.ALTER_REPLICA_LOG_DIRS, version, {"dirs": [
        {"path": path, "topics": [{"name": name, "partitions": parts}
                                  for name, parts in topics]}
        for path, topics in dirs.items()]})
    if "results" not in response:
        return response
    out: dict[str, Any] = {}
    for topic in response["results"]:
        for p in topic["partitions"]:
            out[f"{topic['topic_name']}-{p['partition_index']}"] = p["error_code"]
    return dict(sorted(out.items()))


@scenario("Log dirs", ci=True)
def alter_replica_log_dirs_errors(t: Target) -> Json:
    """AlterReplicaLogDirs v2 and v1: the replica's own dir (NONE, nothing moves), a dir
    not in log.dirs, a partition and a topic not hosted; DescribeLogDirs afterwards."""
    name = t.topic("a")
    t.create_topic(name, 2)
    described = t.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    (log_dir,) = [r["log_dir"] for r in described["results"]]
    missing = t.topic("missing")
    after = t.request(ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": [
        {"topic": name, "partitions": [0, 1]}]})
    return {
        "v2": alter(t, 2, {log_dir: [(name, [0, 7]), (missing, [0])],
                           log_dir + "-elsewhere": [(name, [1])]}),
        "v1": alter(t, 1, {log_dir: [(name, [1])], "/no/such/dir": [(name, [0])]}),
        "described_after": [{"error_code": r["error_code"], "topics": [
            {"partitions": sorted(({k: v for k, v in p.items() if k != "partition_size"}
                                   for p in topic["partitions"]),
                                  key=lambda p: p["partition_index"])}
            for topic in r["topics"]]} for r in after["results"]],
    }


BROKER = 4
CORDONED = "cordoned.log.dirs"


def set_cordoned(t: Target, value: str | None, name: str = "1",
                 controller: bool = False) -> Json:
    """IncrementalAlterConfigs of ``cordoned.log.dirs`` (SET, or DELETE for None)."""
    response = t.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": BROKER, "resource_name": name, "configs": [
            {"name": CORDONED, "config_operation": 0 if value is not None else 1,
             "value": value}]}], "validate_only": False}, controller=controller)
    if "responses" not in response:
        return response
    (answer,) = response["responses"]
    return {"error_code": answer["error_code"], "error_message": answer["error_message"]}


def cordoned_dirs(t: Target) -> list[bool]:
    return [r["is_cordoned"] for r in
            t.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})["results"]]


def placement(t: Target, name: str) -> Json:
    """CreateTopics v7 validate_only with the default replication factor: its answer."""
    response = t.request(ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": -1,
                    "assignments": [], "configs": []}],
        "timeout": 10_000, "validate_only": True})
    (topic,) = response["topics"]
    return {"error_code": topic["error_code"], "error_message": topic["error_message"]}


@scenario("Log dirs", ci=True, compare_messages=True)
def cordoned_log_dirs(t: Target) -> Json:
    """KIP-1066 on a broker of one log dir: cordoned.log.dirs refused where it names no
    log dir, mixes * with a dir, is set at cluster level, or grows when sent to the
    controller directly; set through the broker, DescribeLogDirs v5 says the dir is
    cordoned, DescribeConfigs shows it, a replica cannot be moved into it and the
    controller has nowhere to place a new topic; deleted, all is as before. (The node's
    log dir path is written <dir> in messages.)"""
    name = t.topic("c")
    t.create_topic(name, 1)
    (log_dir,) = [r["log_dir"] for r in
                  t.request(ApiKey.DESCRIBE_LOG_DIRS, 5, {"topics": None})["results"]]

    def anonymous(answer: Json) -> Json:
        if isinstance(answer, dict) and isinstance(answer.get("error_message"), str):
            return {**answer, "error_message": answer["error_message"].replace(log_dir, "<dir>")}
        return answer
    out: dict[str, Any] = {"before": cordoned_dirs(t)}
    out["not_a_log_dir"] = set_cordoned(t, "/no/such/dir")
    out["star_and_a_dir"] = anonymous(set_cordoned(t, f"*,{log_dir}"))
    out["cluster_level"] = anonymous(set_cordoned(t, log_dir, name=""))
    out["to_the_controller"] = anonymous(set_cordoned(t, log_dir, controller=True))
    out["set"] = set_cordoned(t, log_dir)
    out["cordoned"] = wait_until(lambda: cordoned_dirs(t) == [True] and [True], 30, 0.1,
                                 f"{t.side}: the dir never showed as cordoned")
    described = t.request(ApiKey.DESCRIBE_CONFIGS, 4, {
        "resources": [{"resource_type": BROKER, "resource_name": "1",
                       "configuration_keys": [CORDONED]}],
        "include_synonyms": True, "include_documentation": True})
    (config,) = described["results"][0]["configs"]
    out["described"] = {**config, "value": config["value"].replace(log_dir, "<dir>"),
                        "synonyms": [{**s, "value": (s["value"] or "").replace(log_dir, "<dir>")}
                                     for s in config["synonyms"]]}
    moved = t.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
        {"path": log_dir, "topics": [{"name": name, "partitions": [0]}]}]})
    out["move_into_it"] = [p["error_code"] for r in moved["results"] for p in r["partitions"]]
    out["placement"] = wait_until(
        lambda: (lambda a: a if a["error_code"] != "NONE" else None)(
            placement(t, t.topic("p"))),
        30, 0.1, f"{t.side}: the controller kept placing on a broker with every dir cordoned")
    out["shrunk_at_the_controller"] = anonymous(set_cordoned(t, log_dir, controller=True))
    out["deleted"] = set_cordoned(t, None)
    out["after"] = wait_until(lambda: cordoned_dirs(t) == [False] and [False], 30, 0.1,
                              f"{t.side}: the dir stayed cordoned")
    out["placement_after"] = wait_until(
        lambda: (lambda a: a if a["error_code"] == "NONE" else None)(
            placement(t, t.topic("q"))),
        30, 0.1, f"{t.side}: the controller never placed on the broker again")
    return out
