"""ListOffsets by timestamp, earliest, latest and max timestamp, on a log whose batches
carry timestamps out of order, on an empty partition, under read_committed with an open
transaction, and for partitions that do not exist; OffsetForLeaderEpoch, which answers
from the same leader-epoch cache."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Json, scenario
from tests.oracle.target import Target

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -2, -1, -3, -4
BATCHES = [[1000, 3000], [2000], [5000, 4000]]
"""Record timestamps, one list per batch: offsets 0-1, 2, 3-4; the largest (5000) is
offset 3, not the last."""


def request(t: Target, topic: str, queries: list[tuple[int, int, int]], isolation: int = 0,
            version: int = 10) -> dict[str, Any]:
    return t.request(ApiKey.LIST_OFFSETS, version, {
        "replica_id": -1, "isolation_level": isolation, "timeout": 10000,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": p, "current_leader_epoch": epoch, "timestamp": ts}
            for p, ts, epoch in queries]}]})


def list_offsets(t: Target, topic: str, queries: list[tuple[int, int, int]],
                 isolation: int = 0, version: int = 10) -> Json:
    """(partition, timestamp, current leader epoch) queries, one request each (a
    partition twice in one request is INVALID_REQUEST); the answers keyed
    ``p<partition> @<timestamp>``."""
    out: dict[str, Json] = {}
    for p, ts, epoch in queries:
        response = request(t, topic, [(p, ts, epoch)], isolation, version)
        out[f"p{p} @{ts}"] = (response["topics"][0]["partitions"][0]
                              if response.get("topics") else response)
    return out


@scenario("ListOffsets", ci=True)
def list_offsets_by_time(t: Target) -> Json:
    """ListOffsets v10 on a partition of three batches with timestamps out of order:
    earliest, latest, max timestamp, earliest-local, and timestamps before, between,
    equal to and after the records'; an empty partition; a leader epoch from the future;
    an unknown partition and topic; v1; a partition twice in one request."""
    name = t.topic("a")
    t.create_topic(name, 2)
    for i, stamps in enumerate(BATCHES):
        records = [(None, f"r{i}-{j}".encode()) for j in range(len(stamps))]
        answer = t.produce_batch(name, 0, records, timestamp=stamps)
        assert answer.get("error_code") == "NONE", answer
    queries = [(0, ts, -1) for ts in (EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL,
                                      0, 1000, 1500, 2000, 3000, 3500, 4000, 5000, 6000)]
    return {
        "partition_0": list_offsets(t, name, queries),
        "empty_partition": list_offsets(t, name, [(1, ts, -1) for ts in (
            EARLIEST, LATEST, MAX_TIMESTAMP, 0)]),
        "future_leader_epoch": list_offsets(t, name, [(0, LATEST, 5)]),
        "unknown_partition": list_offsets(t, name, [(9, LATEST, -1)]),
        "unknown_topic": list_offsets(t, t.topic("nope"), [(0, LATEST, -1)]),
        "v1_latest": list_offsets(t, name, [(0, LATEST, -1)], version=1),
        "v1_max_timestamp": list_offsets(t, name, [(0, MAX_TIMESTAMP, -1)], version=1),
        "partition_twice": request(t, name, [(0, LATEST, -1), (0, EARLIEST, -1)]),
    }


@scenario("ListOffsets", ci=True)
def list_offsets_read_committed(t: Target) -> Json:
    """ListOffsets v10 latest, max timestamp, earliest and by timestamp under
    read_uncommitted and read_committed while a transaction is open on the partition
    (the last stable offset), then latest after it is aborted."""
    name = t.topic("a")
    t.create_topic(name, 1)
    t.produce(name, ["before-1", "before-2"], timestamps=[1000, 1001])
    producer = t.producer(**{"transactional.id": t.topic("txn")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i, value in enumerate(("open-1", "open-2", "open-3")):
        producer.produce(name, value=value, partition=0, timestamp=2000 + i)
    producer.flush(30)
    queries = [(0, LATEST, -1), (0, MAX_TIMESTAMP, -1), (0, EARLIEST, -1), (0, 500, -1),
               (0, 1500, -1)]
    during = {"read_uncommitted": list_offsets(t, name, queries, isolation=0),
              "read_committed": list_offsets(t, name, queries, isolation=1)}
    producer.abort_transaction(30)

    def settled() -> Json:
        """Both offsets once the abort marker is written: Kafka's coordinator writes
        markers after it answers EndTxn, Ottla's before."""
        after = {"read_uncommitted": list_offsets(t, name, queries[:1], isolation=0),
                 "read_committed": list_offsets(t, name, queries[:1], isolation=1)}
        offsets = {a["p0 @-1"]["offset"] for a in after.values()}  # type: ignore[index]
        return after if offsets == {6} else None
    return {"open_transaction": during,
            "aborted": wait_until(settled, 30, 0.1, f"{t.side}: the abort marker")}


@scenario("ListOffsets", ci=True)
def offset_for_leader_epoch(t: Target) -> Json:
    """OffsetForLeaderEpoch v4 as a consumer asks it, on a partition of three batches and
    on an empty one: the leader's epoch (0), one above it, -1, with the current leader
    epoch unknown, right and from the future."""
    name = t.topic("a")
    t.create_topic(name, 2)
    for i, stamps in enumerate(BATCHES):
        records = [(None, f"r{i}-{j}".encode()) for j in range(len(stamps))]
        answer = t.produce_batch(name, 0, records, timestamp=stamps)
        assert answer.get("error_code") == "NONE", answer
    out: dict[str, Json] = {}
    for p in (0, 1):
        for epoch, current in ((0, -1), (0, 0), (1, -1), (-1, -1), (0, 5)):
            response = t.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
                "replica_id": -1, "topics": [{"topic": name, "partitions": [
                    {"partition": p, "current_leader_epoch": current,
                     "leader_epoch": epoch}]}]})
            out[f"p{p} epoch {epoch} current {current}"] = (
                response["topics"][0]["partitions"][0] if response.get("topics")
                else response)
    return out
