"""Transactions v2 (KIP-890 part 2) against a real node, spoken as a Java 4.x producer
speaks it once it sees ``transaction.version`` 2: no AddPartitionsToTxn or
AddOffsetsToTxn, the first Produce v12 of a transaction on a partition and the
TxnOffsetCommit v5 add them, and every EndTxn v5 answers the epoch the next transaction
uses. No client we test with implements it yet (librdkafka does not), so the requests
are built here; the records are read back with librdkafka, and its transactions v1
producer keeps working beside it (every other transactions test runs at level 2)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.client.blocking import BlockingClient
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import build_batch
from tests.helpers import OttlaProcess, running_ottla, wait_until

TOPIC = "orders"
GROUP = "copier"


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    with running_ottla(str(tmp_path_factory.mktemp("transactions-v2"))) as n:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(30)
        yield n


class V2Producer:
    """The requests of a transactions v2 producer, each retried while the broker
    answers a retriable error, as a client does."""

    def __init__(self, node: OttlaProcess, transactional_id: str) -> None:
        self.client = BlockingClient(node.bootstrap, timeout=30)
        self.transactional_id = transactional_id
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[int, int] = {}

    def retry(self, send: Any, error_of: Any, timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            response = send()
            error = ErrorCode(error_of(response))
            if error == ErrorCode.none or not error.retriable or time.monotonic() > deadline:
                return response
            time.sleep(0.05)  # the client's retry backoff (bounded by ``timeout``)

    def init(self) -> None:
        response = self.retry(lambda: self.client.request(ApiKey.INIT_PRODUCER_ID, 5, {
            "transactional_id": self.transactional_id, "transaction_timeout": 60_000,
            "producer_id": -1, "producer_epoch": -1}), lambda r: r.error_code)
        assert response.error_code == ErrorCode.none
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch

    def produce(self, partition: int, values: list[bytes], epoch: int | None = None,
                version: int = 12) -> ErrorCode:
        epoch = self.epoch if epoch is None else epoch
        sequence = self.sequences.get(partition, 0)
        batch = build_batch([(None, v) for v in values], producer_id=self.producer_id,
                            producer_epoch=epoch, base_sequence=sequence, transactional=True,
                            timestamp=int(time.time() * 1000))
        response = self.retry(lambda: self.client.request(ApiKey.PRODUCE, version, {
            "transactional_id": self.transactional_id, "acks": -1, "timeout": 10_000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": partition, "records": batch}]}]}),
            lambda r: r.responses[0].partition_responses[0].error_code)
        error = ErrorCode(response.responses[0].partition_responses[0].error_code)
        if error == ErrorCode.none:
            self.sequences[partition] = sequence + len(values)
        return error

    def commit_offsets(self, offsets: dict[int, int]) -> ErrorCode:
        response = self.retry(lambda: self.client.request(ApiKey.TXN_OFFSET_COMMIT, 5, {
            "transactional_id": self.transactional_id, "group_id": GROUP,
            "producer_id": self.producer_id, "producer_epoch": self.epoch,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in offsets.items()]}]}),
            lambda r: r.topics[0].partitions[0].error_code)
        return ErrorCode(response.topics[0].partitions[0].error_code)

    def end(self, commit: bool, epoch: int | None = None) -> Any:
        response = self.retry(lambda: self.client.request(ApiKey.END_TXN, 5, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch if epoch is None else epoch, "committed": commit}),
            lambda r: r.error_code)
        if response.error_code == ErrorCode.none and epoch is None:
            assert response.producer_epoch == self.epoch + 1, "EndTxn v5 bumps the epoch"
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()  # a new epoch starts every partition at sequence 0
        return response


def read(node: OttlaProcess, isolation: str, expected: int, settle: float = 1.0
         ) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "reader",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    got: list[bytes] = []
    deadline, settled = time.monotonic() + 15, None
    while time.monotonic() < (settled or deadline):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            got.append(message.value())
        if settled is None and len(got) >= expected:
            settled = time.monotonic() + settle
    consumer.close()
    return sorted(got)


def committed_offset(node: OttlaProcess, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP,
                         "isolation.level": "read_committed"})
    (tp,) = consumer.committed([TopicPartition(TOPIC, partition)], timeout=15)
    consumer.close()
    return tp.offset


def test_the_node_offers_transactions_v2(node) -> None:
    with BlockingClient(node.bootstrap) as client:
        versions = client.api_versions()
    finalized = {f.name: f.max_version_level for f in versions.finalized_features}
    assert finalized.get("transaction.version") == 2
    top = {k.api_key: k.max_version for k in versions.api_keys}
    assert top[ApiKey.PRODUCE] >= 12 and top[ApiKey.END_TXN] == 5 and \
        top[ApiKey.TXN_OFFSET_COMMIT] == 5


def test_a_v2_producer_commits_and_aborts_without_adding_partitions(node) -> None:
    p = V2Producer(node, "copier-v2")
    p.init()
    first_epoch = p.epoch
    assert p.produce(0, [b"one-0", b"one-1"]) == ErrorCode.none
    assert p.produce(1, [b"one-2"]) == ErrorCode.none
    assert p.commit_offsets({0: 42}) == ErrorCode.none
    assert p.end(commit=True).error_code == ErrorCode.none
    assert p.epoch == first_epoch + 1
    # The next transaction at once, while the markers of the last may still be written.
    assert p.produce(0, [b"two-0"]) == ErrorCode.none
    assert p.produce(1, [b"two-1"], epoch=first_epoch) == ErrorCode.invalid_producer_epoch
    assert p.commit_offsets({0: 99}) == ErrorCode.none
    assert p.end(commit=False).error_code == ErrorCode.none
    assert read(node, "read_committed", 3) == [b"one-0", b"one-1", b"one-2"]
    assert read(node, "read_uncommitted", 4) == [b"one-0", b"one-1", b"one-2", b"two-0"]
    assert committed_offset(node, 0) == 42  # the aborted commit of 99 never shows
    # A retried EndTxn of the epoch it ended is answered again, not fenced.
    retry = p.end(commit=False, epoch=p.epoch - 1)
    assert (retry.error_code, retry.producer_epoch) == (ErrorCode.none, p.epoch)
    assert p.end(commit=True, epoch=p.epoch - 1).error_code == ErrorCode.invalid_txn_state


def test_transactions_v1_on_a_node_at_level_1_verifies_instead_of_adding(node) -> None:
    """At transaction.version 1 a Produce v12 batch to a partition the producer did not
    add is refused (KIP-890 part 1) rather than opening a transaction."""
    features = [sys.executable, "-m", "ottla", "features", "--bootstrap-server",
                node.bootstrap]
    subprocess.run([*features, "downgrade", "--feature", "transaction.version=1"],
                   check=True, capture_output=True, timeout=60)
    try:
        def at_level_1() -> bool:
            with BlockingClient(node.bootstrap) as client:
                finalized = {f.name: f.max_version_level
                             for f in client.api_versions().finalized_features}
            return finalized.get("transaction.version") == 1
        wait_until(at_level_1, 15, message="transaction.version at level 1")
        p = V2Producer(node, "not-added")
        p.init()
        assert p.produce(0, [b"stray"]) == ErrorCode.transaction_abortable
        assert p.produce(0, [b"stray"], version=10) == ErrorCode.invalid_txn_state
    finally:
        subprocess.run([*features, "upgrade", "--feature", "transaction.version=2"],
                       check=True, capture_output=True, timeout=60)


def test_a_v2_transaction_survives_kill_9_of_its_coordinator(tmp_path) -> None:
    """The client's transaction version is in ``__transaction_state`` (value version 1),
    so after a restart the coordinator still bumps the epoch and answers retries."""
    with running_ottla(str(tmp_path / "node")) as n:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(30)
        p = V2Producer(n, "survivor")
        p.init()
        assert p.produce(0, [b"kept"]) == ErrorCode.none
        assert p.end(commit=True).error_code == ErrorCode.none
        assert p.produce(1, [b"open"]) == ErrorCode.none
        p.client.close()
        n.kill9()
        n.start()
        p.client = BlockingClient(n.bootstrap, timeout=30)
        assert p.end(commit=True).error_code == ErrorCode.none  # epoch bumped again
        ended = p.end(commit=True, epoch=p.epoch - 1)  # its retry
        assert (ended.error_code, ended.producer_epoch) == (ErrorCode.none, p.epoch)
        assert read(n, "read_committed", 2) == [b"kept", b"open"]
