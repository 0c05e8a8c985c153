"""Exactly-once copying at volume: a consume-transform-produce loop (a read_committed
consumer in a group, a transactional producer committing the consumed offsets with
send_offsets_to_transaction) copies 100,000 records from a 3-partition topic to another
in transactions of about 1,000 records, and every third transaction is aborted and its
input read again from the group's committed offsets, as Kafka's exactly-once examples
do. A read_committed reader of the output then sees each input record exactly once and
nothing of an aborted transaction; a read_uncommitted reader sees the aborted copies
too, every one of them."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess, running_ottla

pytestmark = pytest.mark.slow

RECORDS = 100_000
PARTITIONS = 3
PER_TRANSACTION = 1_000
ABORT_EVERY = 3
DEADLINE_S = 150.0
"""For the whole copy; each step below has a bound of its own too."""


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    with running_ottla(str(tmp_path_factory.mktemp("transactions-copy"))) as n:
        yield n


def fill(node: OttlaProcess, topic: str) -> list[bytes]:
    """``RECORDS`` values ``in-<i>`` written round robin by an idempotent producer."""
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True,
                         "linger.ms": 20, "batch.size": 262144})
    errors: list[KafkaError] = []
    written = [b"in-%d" % i for i in range(RECORDS)]
    for i, value in enumerate(written):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % PARTITIONS,
                                 on_delivery=lambda e, _m: e is None or errors.append(e))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0 and errors == []
    return written


def read_all(node: OttlaProcess, topic: str, isolation: str, expected: int,
             timeout: float = 20.0, settle: float = 1.0) -> list[bytes]:
    """Every value of ``topic`` from the start: until ``expected`` arrived (or the
    timeout), then ``settle`` seconds more to catch anything that should not be there."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"check-{topic}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    settled: float | None = None
    try:
        while time.monotonic() < (settled or deadline):
            got += [m.value() for m in consumer.consume(10_000, 0.2) if m.error() is None]
            if settled is None and len(got) >= expected:
                settled = time.monotonic() + settle
    finally:
        consumer.close()
    return got


def untag(value: bytes) -> tuple[bytes, int]:
    """An output value ``<input>@<transaction>`` split in its two parts."""
    original, _, txn = value.rpartition(b"@")
    return original, int(txn)


def test_copying_with_every_third_transaction_aborted_is_exactly_once(node) -> None:
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic("copy-in", PARTITIONS, 1),
                                       NewTopic("copy-out", PARTITIONS, 1)]).values():
        future.result(30)
    inputs = fill(node, "copy-in")
    filled = time.monotonic()

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "copier",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed",
                         # Prefetched to the end, the consumer has a fetch parked at the
                         # broker; a rewind waits for its answer before fetching again.
                         "fetch.wait.max.ms": 100})
    consumer.subscribe(["copy-in"])
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "copier",
                         "linger.ms": 10})
    producer.init_transactions(30)

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    committed_txns: set[int] = set()
    aborted: list[bytes] = []  # what the aborted transactions wrote (and flushed)
    copied = 0  # input records whose copy was committed
    txn = 0
    deadline = started + DEADLINE_S
    try:
        while copied < RECORDS:
            assert time.monotonic() < deadline, \
                f"copied {copied} of {RECORDS} in {txn} transactions"
            batch: list[Message] = []
            while len(batch) < PER_TRANSACTION and time.monotonic() < deadline:
                messages = consumer.consume(PER_TRANSACTION - len(batch), 0.2)
                batch += [m for m in messages if m.error() is None]
                if not messages and batch:
                    break  # what is there is all there is for now
            if not batch:
                continue
            txn += 1
            producer.begin_transaction()
            offsets: dict[int, int] = {}
            for m in batch:
                while True:
                    try:
                        producer.produce("copy-out", value=b"%s@%d" % (m.value(), txn),
                                         partition=m.partition(), on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.05)
                offsets[m.partition()] = max(offsets.get(m.partition(), 0), m.offset() + 1)
            producer.send_offsets_to_transaction(
                [TopicPartition("copy-in", p, o) for p, o in offsets.items()],
                consumer.consumer_group_metadata(), 30)
            if txn % ABORT_EVERY == 0:
                # Every copy is on the broker before the abort (abort_transaction would
                # purge what is still queued): the read_uncommitted count below is exact.
                assert producer.flush(30) == 0 and errors == []
                producer.abort_transaction(30)
                aborted += [b"%s@%d" % (m.value(), txn) for m in batch]
                # Back to what the group committed: this batch is read again.
                for tp in consumer.committed(consumer.assignment(), 30):
                    consumer.seek(TopicPartition(tp.topic, tp.partition,
                                                 tp.offset if tp.offset >= 0 else 0))
                continue
            producer.commit_transaction(30)
            committed_txns.add(txn)
            copied += len(batch)
        copy_done = time.monotonic()
        assert errors == []
        assert copied == RECORDS
        committed = consumer.committed(
            [TopicPartition("copy-in", p) for p in range(PARTITIONS)], 30)
        assert sum(tp.offset for tp in committed) == RECORDS
    finally:
        consumer.close()

    assert len(committed_txns) == txn - txn // ABORT_EVERY and len(aborted) > 0
    final = read_all(node, "copy-out", "read_committed", RECORDS)
    originals = Counter(untag(v)[0] for v in final)
    assert originals == Counter(inputs)  # each input exactly once
    assert {untag(v)[1] for v in final} <= committed_txns  # nothing aborted
    everything = read_all(node, "copy-out", "read_uncommitted", RECORDS + len(aborted))
    assert len(everything) == RECORDS + len(aborted)
    assert Counter(everything) == Counter(final) + Counter(aborted)
    print(f"\n{txn} transactions ({len(committed_txns)} committed, {len(aborted)} records "
          f"aborted); filled in {filled - started:.1f} s, copied in "
          f"{copy_done - filled:.1f} s, checked in {time.monotonic() - copy_done:.1f} s")
