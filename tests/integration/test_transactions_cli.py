"""``ottla transactions`` (kafka-transactions.sh) against a real node, with librdkafka's
transactional producer: ``list`` and ``describe`` show an ongoing transaction (its state,
partitions and producer), ``describe-producers`` its start offset on a partition, and a
hanging transaction (a transactional batch whose producer the coordinator never heard
of, on a broker without KIP-890 verification) is found by ``find-hanging`` and removed
by ``abort``, after which read_committed consumers get past it.

confluent-kafka 2.16 has no AdminClient.list_transactions / describe_transactions, so
the APIs are reached through the tool alone."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey
from ottla.protocol.records import build_batch
from tests.helpers import OttlaProcess, WireClient, running_ottla, wait_until
from tests.integration.test_admin import run_cli
from tests.integration.test_transactions import read

GHOST_PRODUCER_ID = 987_654
"""A producer id no transactional id has: its open transaction hangs."""


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    """Without KIP-890 verification, which would refuse the hanging transactions'
    batches (as it does a Kafka 4 broker's): a broker before it, or one with it turned
    off, is where transactions hang."""
    with running_ottla(str(tmp_path_factory.mktemp("transactions-cli")), **{
            "transaction.partition.verification.enable": "false"}) as n:
        yield n


def transactions(node: OttlaProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("transactions", "--bootstrap-server", node.bootstrap, *args)


def table(result: subprocess.CompletedProcess[str]) -> list[dict[str, str]]:
    """The rows of Kafka's tab-separated table, by column name."""
    assert result.returncode == 0, result.stderr
    header, *rows = [[cell.strip() for cell in line.split("\t")[:-1]]
                     for line in result.stdout.splitlines()]
    return [dict(zip(header, row, strict=True)) for row in rows]


def create(node: OttlaProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def plain(node: OttlaProcess, topic: str, partition: int, *values: bytes) -> None:
    p = Producer({"bootstrap.servers": node.bootstrap})
    for value in values:
        p.produce(topic, value=value, partition=partition)
    assert p.flush(30) == 0


def transactional(node: OttlaProcess, transactional_id: str) -> Producer:
    # Open transactions outlive several CLI runs: longer than librdkafka's default 60 s.
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 600_000})
    p.init_transactions(30)
    return p


def read_committed(node: OttlaProcess, topic: str, expected: int) -> list[bytes]:
    """Partition 0's values (sorted) a read_committed consumer gets."""
    return read(node, topic, "read_committed", expected, partitions=1)


def test_list_describe_and_describe_producers_show_an_ongoing_transaction(node) -> None:
    create(node, "orders", 2)
    plain(node, "orders", 0, b"plain-0", b"plain-1", b"plain-2")
    p = transactional(node, "orders-writer")
    p.begin_transaction()
    for i in range(4):
        p.produce("orders", value=b"txn-%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    (listed,) = [r for r in table(transactions(node, "list"))
                 if r["TransactionalId"] == "orders-writer"]
    assert (listed["Coordinator"], listed["TransactionState"]) == ("1", "Ongoing")
    producer_id = listed["ProducerId"]
    (described,) = table(transactions(node, "describe", "--transactional-id", "orders-writer"))
    assert described["CoordinatorId"] == "1"
    assert (described["ProducerId"], described["ProducerEpoch"]) == (producer_id, "0")
    assert (described["TransactionState"], described["TransactionTimeoutMs"]) == \
        ("Ongoing", "600000")
    assert described["TopicPartitions"] == "orders-0,orders-1"
    assert int(described["CurrentTransactionStartTimeMs"]) <= time.time() * 1000
    assert int(described["TransactionDurationMs"]) >= 0

    # The filters: state, producer id, and how long the transaction has been open.
    def listed_ids(*flags: str) -> set[str]:
        return {r["TransactionalId"] for r in table(transactions(node, "list", *flags))}

    assert "orders-writer" in listed_ids("--state", "Ongoing", "--producer-id", producer_id)
    assert "orders-writer" not in listed_ids("--state", "CompleteCommit")
    assert "orders-writer" not in listed_ids("--producer-id", str(int(producer_id) + 1))
    assert "orders-writer" not in listed_ids("--duration-filter", "3600000")
    assert "orders-writer" in listed_ids("--duration-filter", "0")

    producers = table(transactions(node, "describe-producers", "--topic", "orders",
                                   "--partition", "0"))
    (mine,) = [r for r in producers if r["ProducerId"] == producer_id]
    assert mine["CurrentTransactionStartOffset"] == "3"  # after the 3 plain records
    assert (mine["ProducerEpoch"], mine["LastSequence"]) == ("0", "1")

    p.commit_transaction(30)  # answered at PrepareCommit: the markers follow

    def completed() -> dict[str, str] | None:
        (row,) = table(transactions(node, "describe", "--transactional-id", "orders-writer"))
        return row if row["TransactionState"] == "CompleteCommit" else None

    done = wait_until(completed, 30, 0.2, "the transaction completed")
    assert done["TopicPartitions"] == ""
    (mine,) = [r for r in table(transactions(node, "describe-producers", "--topic", "orders",
                                             "--partition", "0"))
               if r["ProducerId"] == producer_id]
    assert mine["CurrentTransactionStartOffset"] == "None"
    assert mine["LatestCoordinatorEpoch"] != "-1"  # the commit marker carried it

    unknown = transactions(node, "describe", "--transactional-id", "nobody")
    assert unknown.returncode == 1
    assert "Failed to describe transaction state of transactional-id `nobody`" in \
        unknown.stderr


def test_a_hanging_transaction_is_found_and_aborted(node) -> None:
    """A transactional batch of a producer id no transactional id has, written 20
    minutes ago: the coordinator will never end it, so read_committed consumers stop
    before it. find-hanging reports it (and not a live transaction on the same
    partition, which its coordinator knows); abort writes its ABORT marker."""
    create(node, "stuck", 1)
    plain(node, "stuck", 0, b"before-0", b"before-1")
    long_ago = int(time.time() * 1000) - 20 * 60_000
    with WireClient(node.bootstrap) as client:
        response = client.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "ghost", "acks": -1, "timeout": 10000,
            "topic_data": [{"name": "stuck", "partition_data": [{"index": 0, "records":
                build_batch([(None, b"ghost-0"), (None, b"ghost-1")], timestamp=long_ago,
                            producer_id=GHOST_PRODUCER_ID, producer_epoch=0,
                            base_sequence=0, transactional=True)}]}]})
    (answer,) = response.responses[0].partition_responses
    assert (answer.error_code, answer.base_offset) == (0, 2)
    plain(node, "stuck", 0, b"after-0", b"after-1")
    live = transactional(node, "stuck-writer")
    live.begin_transaction()
    live.produce("stuck", value=b"live", partition=0)
    assert live.flush(30) == 0
    assert read_committed(node, "stuck", 2) == sorted([b"before-0", b"before-1"])

    def hanging(*flags: str) -> list[tuple[str, str, str, str]]:
        return [(r["Topic"], r["Partition"], r["ProducerId"], r["StartOffset"])
                for r in table(transactions(node, "find-hanging", *flags))]

    ghost = [("stuck", "0", str(GHOST_PRODUCER_ID), "2")]
    assert hanging("--broker-id", "1") == ghost
    # With no age limit the live transaction is a candidate too, but its coordinator
    # has it on this partition: not hanging.
    assert hanging("--topic", "stuck", "--max-transaction-timeout", "0") == ghost
    (row,) = table(transactions(node, "find-hanging", "--topic", "stuck", "--partition", "0"))
    assert (row["ProducerEpoch"], row["CoordinatorEpoch"]) == ("0", "-1")
    assert row["LastTimestamp"] == str(long_ago) and int(row["Duration(min)"]) >= 20

    missing = transactions(node, "abort", "--topic", "stuck", "--partition", "0",
                           "--start-offset", "3")
    assert missing.returncode == 1
    assert "Could not find any open transactions starting at offset 3 on partition " \
        "stuck-0" in missing.stderr
    aborted = transactions(node, "abort", "--topic", "stuck", "--partition", "0",
                           "--start-offset", "2")
    assert aborted.returncode == 0, aborted.stderr

    assert hanging("--broker-id", "1") == []
    (ghost_state,) = [r for r in table(transactions(node, "describe-producers", "--topic",
                                                    "stuck", "--partition", "0"))
                      if r["ProducerId"] == str(GHOST_PRODUCER_ID)]
    assert ghost_state["CurrentTransactionStartOffset"] == "None"
    # Past the aborted batch up to the live transaction, then everything once it commits.
    assert read_committed(node, "stuck", 4) == sorted([b"before-0", b"before-1", b"after-0",
                                                       b"after-1"])
    live.commit_transaction(30)
    assert read_committed(node, "stuck", 5) == sorted([b"before-0", b"before-1", b"after-0",
                                                       b"after-1", b"live"])


def test_abort_by_producer_id_epoch_and_coordinator_epoch(node) -> None:
    """The older brokers' form of abort: the producer named outright."""
    create(node, "stuck-old", 1)
    with WireClient(node.bootstrap) as client:
        response = client.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "ghost", "acks": -1, "timeout": 10000,
            "topic_data": [{"name": "stuck-old", "partition_data": [{"index": 0, "records":
                build_batch([(None, b"ghost")], timestamp=int(time.time() * 1000),
                            producer_id=GHOST_PRODUCER_ID + 1, producer_epoch=3,
                            base_sequence=0, transactional=True)}]}]})
    assert response.responses[0].partition_responses[0].error_code == 0
    plain(node, "stuck-old", 0, b"after")
    no_epoch = transactions(node, "abort", "--topic", "stuck-old", "--partition", "0",
                            "--producer-id", str(GHOST_PRODUCER_ID + 1))
    assert no_epoch.returncode == 1
    assert "Missing required argument --producer-epoch" in no_epoch.stderr
    aborted = transactions(node, "abort", "--topic", "stuck-old", "--partition", "0",
                           "--producer-id", str(GHOST_PRODUCER_ID + 1), "--producer-epoch",
                           "3", "--coordinator-epoch", "-1")
    assert aborted.returncode == 0, aborted.stderr
    assert read_committed(node, "stuck-old", 1) == [b"after"]
