"""AlterReplicaLogDirs on a broker of one log dir: the answer for a replica already in the
dir asked for, a dir the broker does not have, a partition and a topic it does not host,
in v1 and v2; and DescribeLogDirs of the partitions afterwards (nothing moved)."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
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
