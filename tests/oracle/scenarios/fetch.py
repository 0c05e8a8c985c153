"""Fetch edge cases: offsets out of range and at the end, limits smaller than a batch, an
offset inside a batch, leader epochs, and read_committed over aborted, committed and open
transactions (the aborted_transactions list and the last stable offset). The batches are
built here, so both logs hold the same bytes."""

from __future__ import annotations

from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Json, scenario
from tests.oracle.scenarios.common import end_txn, topic_id, transaction
from tests.oracle.target import Target

BIG = b"x" * 3000
"""A value that makes one batch larger than the limits the scenarios fetch with."""


def fetch(t: Target, topic: str, offsets: dict[int, int], *, version: int = 12,
          max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
          isolation: int = 0, leader_epoch: int = -1, last_fetched_epoch: int = -1
          ) -> Json:
    """One sessionless Fetch (max_wait 0) of ``offsets`` ({partition: fetch offset}); by
    name below v13, by id from v13."""
    by = ({"topic_id": topic_id(t, topic)} if version >= 13 else {"topic": topic})
    response: dict[str, Any] = t.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [], "topics": [{**by, "partitions": [
            {"partition": p, "current_leader_epoch": leader_epoch, "fetch_offset": offset,
             "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
             "partition_max_bytes": partition_max_bytes} for p, offset in offsets.items()]}]})
    return response


def three_batches(t: Target, name: str, partitions: int, timestamp: int) -> None:
    """On each partition: 2 small records (offsets 0-1), 1 of ``BIG`` (2), 3 small (3-5)."""
    for p in range(partitions):
        for i, (count, value) in enumerate([(2, b"small"), (1, BIG), (3, b"tail")]):
            answer = t.produce_batch(name, p, [(None, value)] * count,
                                     timestamp=timestamp + i)
            assert answer.get("error_code") == "NONE", answer


@scenario("Fetch", ci=True)
def fetch_edges(t: Target) -> Json:
    """Fetch v12 (and v17 by topic id) on partitions of three batches: from 0, from inside
    a batch, at the end, past the end, with max_bytes and partition_max_bytes smaller than
    one batch, across two partitions sharing max_bytes, with a leader epoch from the
    future, a last fetched epoch the log never had, an unknown partition, topic and id."""
    name = t.topic("a")
    t.create_topic(name, 2)
    three_batches(t, name, 2, t.now)
    return {
        "from_0": fetch(t, name, {0: 0}),
        "inside_a_batch": fetch(t, name, {0: 1}),
        "at_the_end": fetch(t, name, {0: 6}),
        "past_the_end": fetch(t, name, {0: 7}),
        "negative_offset": fetch(t, name, {0: -5}),
        "max_bytes_below_a_batch": fetch(t, name, {0: 2}, max_bytes=100),
        "partition_max_bytes_below_a_batch": fetch(t, name, {0: 2}, partition_max_bytes=100),
        "max_bytes_across_partitions": fetch(t, name, {0: 0, 1: 0}, max_bytes=3200),
        "partition_max_bytes_each": fetch(t, name, {0: 0, 1: 2}, partition_max_bytes=200),
        "future_leader_epoch": fetch(t, name, {0: 0}, leader_epoch=5),
        "unknown_last_fetched_epoch": fetch(t, name, {0: 3}, last_fetched_epoch=5),
        "unknown_partition": fetch(t, name, {7: 0}),
        "unknown_topic": fetch(t, t.topic("nope"), {0: 0}),
        "v17_by_id": fetch(t, name, {0: 0}, version=17),
        "v17_unknown_id": t.request(ApiKey.FETCH, 17, {
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic_id": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}]}),
    }


@scenario("Fetch", ci=True)
def fetch_old_timestamps(t: Target) -> Json:
    """Fetch v12 from 0 of a partition whose three batches carry timestamps of 1970 (a
    replay of old data): how many batches one fetch returns."""
    name = t.topic("a")
    t.create_topic(name, 1)
    three_batches(t, name, 1, 1000)
    return {"from_0": fetch(t, name, {0: 0})}


@scenario("Fetch", ci=True)
def fetch_read_committed(t: Target) -> Json:
    """Fetch v12 read_committed and read_uncommitted over: a plain batch, an aborted
    transaction, a committed one, another aborted one of a second producer, and an open
    one (the last stable offset stops before it); the aborted_transactions each returns,
    from 0 and from inside the log; then the same once the open one is aborted."""
    name = t.topic("a")
    t.create_topic(name, 1)
    first, second, third = (t.topic(x) for x in ("txn-1", "txn-2", "txn-3"))
    assert t.produce_batch(name, 0, [(None, b"plain")], timestamp=t.now)["error_code"] == "NONE"
    one = transaction(t, first, name, 0, ["aborted-1", "aborted-2"], False, t.now)
    one = transaction(t, first, name, 0, ["committed-1"], True, t.now, one)
    transaction(t, second, name, 0, ["aborted-3"], False, t.now)
    open_state = transaction(t, third, name, 0, ["open-1", "open-2"], None, t.now)
    result: dict[str, Json] = {}
    for label, isolation in (("read_uncommitted", 0), ("read_committed", 1)):
        result[label] = {f"from_{offset}": fetch(t, name, {0: offset}, isolation=isolation)
                         for offset in (0, 4, 8)}
    ended = end_txn(t, third, open_state["producer_id"], open_state["epoch"], False)
    assert ended["error_code"] == "NONE", ended

    def settled() -> Json:
        """Once the abort marker of the open transaction is written (Kafka writes it after
        answering EndTxn) the last stable offset is the high watermark."""
        response = fetch(t, name, {0: 0}, isolation=1)
        partition = response["responses"][0]["partitions"][0]  # type: ignore[index]
        done = partition["last_stable_offset"] == partition["high_watermark"] == 11
        return response if done else None
    result["after_abort_read_committed"] = wait_until(settled, 30, 0.1,
                                                      f"{t.side}: the last abort marker")
    return result
