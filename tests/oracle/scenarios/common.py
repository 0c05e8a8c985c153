"""Helpers the scenarios share: results keyed by name rather than by position, so that a
diff names the config or feature that differs; and the few raw requests several use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ottla.protocol.api import ApiKey
from tests.helpers import wait_until
from tests.oracle.model import Json
from tests.oracle.target import Target


def keyed(items: Iterable[Mapping[str, Any]], key: str, drop_key: bool = True
          ) -> dict[str, Json]:
    """``[{key: k, ...}, ...]`` as ``{k: {...}}``: order-free, and a diff path names k."""
    out: dict[str, Json] = {}
    for item in items:
        rest = {k: v for k, v in item.items() if not (drop_key and k == key)}
        out[str(item[key])] = rest
    return out


def metadata(t: Target, topics: list[str] | None, version: int = 12,
             auto_create: bool = False) -> dict[str, Any]:
    return t.request(ApiKey.METADATA, version, {
        "topics": None if topics is None else [{"name": n, "topic_id": None} for n in topics],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": False})


def topic_id(t: Target, topic: str) -> str:
    return t.topic_id(topic)


def topics_by_name(response: dict[str, Any]) -> dict[str, Any]:
    """A Metadata-like response with its topics keyed by name: their order is a hash
    set's in Kafka, no contract."""
    if "topics" not in response:
        return response
    return {**response, "topics": keyed(response["topics"], "name")}


# --- raw transactions: byte-for-byte the same batches on both sides ---------------------

def init_producer_id(t: Target, transactional_id: str | None, producer_id: int = -1,
                     epoch: int = -1, timeout_ms: int = 60000) -> dict[str, Any]:
    """InitProducerId v4, retried while the coordinator loads (the first call creates
    __transaction_state; both answer COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR
    meanwhile); the first other answer."""
    if transactional_id is not None:
        t.find_coordinator(transactional_id, key_type=1)

    def init() -> dict[str, Any] | None:
        response = t.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": transactional_id, "transaction_timeout": timeout_ms,
            "producer_id": producer_id, "producer_epoch": epoch})
        retriable = ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR",
                     "COORDINATOR_NOT_AVAILABLE", "CONCURRENT_TRANSACTIONS")
        return None if response.get("error_code") in retriable else response
    return wait_until(init, 30, 0.1, f"{t.side}: InitProducerId for {transactional_id}")


def add_partitions(t: Target, transactional_id: str, producer_id: int, epoch: int,
                   topic: str, partitions: list[int]) -> dict[str, Any]:
    """AddPartitionsToTxn v3 (what a client before KIP-890 part 2 sends)."""
    return t.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": producer_id, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": partitions}]})


def end_txn(t: Target, transactional_id: str, producer_id: int, epoch: int,
            commit: bool) -> dict[str, Any]:
    return t.request(ApiKey.END_TXN, 3, {
        "transactional_id": transactional_id, "producer_id": producer_id,
        "producer_epoch": epoch, "committed": commit})


def produce_txn(t: Target, transactional_id: str, producer_id: int, epoch: int, topic: str,
                partition: int, values: list[str], sequence: int, timestamp: int
                ) -> dict[str, Any]:
    """One transactional batch of ``values`` through Produce v9."""
    return t.produce_batch(topic, partition, [(None, v.encode()) for v in values],
                           timestamp=timestamp, producer_id=producer_id,
                           producer_epoch=epoch, base_sequence=sequence, transactional=True,
                           transactional_id=transactional_id)


def transaction(t: Target, transactional_id: str, topic: str, partition: int,
                values: list[str], commit: bool | None, timestamp: int,
                state: dict[str, int] | None = None) -> dict[str, int]:
    """One whole transaction of one batch, committed, aborted, or left open (``commit``
    None), with a producer initialised here unless ``state`` (its id, epoch and next
    sequence) continues one; returns that state. Every step must succeed."""
    if state is None:
        init = init_producer_id(t, transactional_id)
        assert init["error_code"] == "NONE", init
        state = {"producer_id": init["producer_id"], "epoch": init["producer_epoch"],
                 "sequence": 0}
    pid, epoch = state["producer_id"], state["epoch"]

    def added() -> str:
        """The partition's error once it is not CONCURRENT_TRANSACTIONS: Kafka answers
        that until the markers of the producer's previous transaction are written."""
        response = add_partitions(t, transactional_id, pid, epoch, topic, [partition])
        code = response["results_by_topic_v3_and_below"][0]["results_by_partition"][0][
            "partition_error_code"]
        return "" if code == "CONCURRENT_TRANSACTIONS" else code
    code = wait_until(added, 30, 0.05, f"{t.side}: AddPartitionsToTxn")
    assert code == "NONE", code
    produced = produce_txn(t, transactional_id, pid, epoch, topic, partition, values,
                           state["sequence"], timestamp)
    assert produced["error_code"] == "NONE", produced
    state["sequence"] += len(values)
    if commit is not None:
        ended = end_txn(t, transactional_id, pid, epoch, commit)
        assert ended["error_code"] == "NONE", ended
        wait_for_markers(t, transactional_id, commit)
    return state


def transaction_state(t: Target, transactional_id: str) -> str:
    described = t.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                          {"transactional_ids": [transactional_id]})
    return described["transaction_states"][0]["transaction_state"]


def wait_for_markers(t: Target, transactional_id: str, commit: bool) -> None:
    """Until the coordinator has written the transaction's markers: both answer EndTxn
    once the decision is logged and write markers after, so a later write of another
    producer could land before them, and the logs would differ by timing alone."""
    done = "CompleteCommit" if commit else "CompleteAbort"
    wait_until(lambda: transaction_state(t, transactional_id) == done, 30, 0.02,
               f"{t.side}: {transactional_id} {done}")
