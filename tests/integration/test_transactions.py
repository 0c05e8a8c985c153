"""Transactions with librdkafka's transactional producer against a real node: commits are
seen by read_committed consumers and aborts are not, an open transaction holds them back
(the last stable offset), a new producer instance fences the old one, the coordinator
aborts a transaction past its timeout, and a transaction left open by a kill -9 is
aborted after the restart while everything committed before stays readable."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import OttlaProcess, running_ottla, wait_until

PARTITIONS = 2


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    with running_ottla(str(tmp_path_factory.mktemp("transactions")), **{
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}) as n:
        yield n


def create(node: OttlaProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(30)


def producer(node: OttlaProcess, transactional_id: str, **config: str | int) -> Producer:
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": transactional_id,
                  **config})
    p.init_transactions(30)
    return p


def read(node: OttlaProcess, topic: str, isolation: str, expected: int,
         timeout: float = 10.0, settle: float = 1.0, partitions: int = PARTITIONS
         ) -> list[bytes]:
    """Every value of ``topic``'s first ``partitions`` from the start (sorted): until
    ``expected`` arrived, then ``settle`` seconds more to catch anything that should not
    be there."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"read-{topic}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    settled: float | None = None
    while time.monotonic() < (settled or deadline):
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            got.append(message.value())
        if settled is None and len(got) >= expected:
            settled = time.monotonic() + settle
    consumer.close()
    return sorted(got)


def values(prefix: str, n: int) -> list[bytes]:
    return sorted(b"%s-%d" % (prefix.encode(), i) for i in range(n))


def send(p: Producer, topic: str, prefix: str, n: int) -> None:
    for i in range(n):
        p.produce(topic, value=b"%s-%d" % (prefix.encode(), i), partition=i % PARTITIONS)
    p.flush(30)


def test_committed_records_are_read_aborted_and_open_ones_are_not(node) -> None:
    create(node, "payments")
    p = producer(node, "payments-writer")
    p.begin_transaction()
    send(p, "payments", "committed", 20)
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, "payments", "aborted", 10)
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, "payments", "open", 5)
    assert read(node, "payments", "read_committed", 20) == values("committed", 20)
    everything = read(node, "payments", "read_uncommitted", 35)
    assert everything == sorted(values("committed", 20) + values("aborted", 10)
                                + values("open", 5))
    p.commit_transaction(30)
    assert read(node, "payments", "read_committed", 25) == \
        sorted(values("committed", 20) + values("open", 5))


def test_a_new_instance_fences_the_old_producer_and_aborts_its_transaction(node) -> None:
    create(node, "fenced")
    old = producer(node, "fenced-writer")
    old.begin_transaction()
    send(old, "fenced", "zombie", 6)
    new = producer(node, "fenced-writer")  # aborts the zombie's transaction
    new.begin_transaction()
    send(new, "fenced", "current", 4)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(10)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower()
    assert read(node, "fenced", "read_committed", 4) == values("current", 4)


def test_a_transaction_past_its_timeout_is_aborted_by_the_coordinator(node) -> None:
    create(node, "slow")
    p = producer(node, "slow-writer", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    send(p, "slow", "late", 4)
    other = producer(node, "slow-other")
    other.begin_transaction()
    send(other, "slow", "ok", 2)
    other.commit_transaction(30)
    # Until the coordinator aborts the slow one, its records hold the committed ones back.
    wait_until(lambda: read(node, "slow", "read_committed", 2, timeout=1, settle=0)
               == values("ok", 2), 20, 0.2, "the timed-out transaction aborted")
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_an_open_transaction_survives_kill_9_only_to_be_aborted(tmp_path) -> None:
    data_dir = str(tmp_path / "node")
    with running_ottla(data_dir) as n:
        create(n, "crash")
        p = producer(n, "crash-writer")
        p.begin_transaction()
        send(p, "crash", "before", 8)
        group = Consumer({"bootstrap.servers": n.bootstrap, "group.id": "crash-group"})
        p.send_offsets_to_transaction([TopicPartition("crash", 0, 17)],
                                      group.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        p.begin_transaction()
        send(p, "crash", "lost", 5)
        p.send_offsets_to_transaction([TopicPartition("crash", 0, 99)],
                                      group.consumer_group_metadata(), 30)
        group.close()
        n.kill9()
        n.start()
        assert read(n, "crash", "read_committed", 8) == values("before", 8)
        again = producer(n, "crash-writer")  # fences and aborts what was left open
        # The group's offsets reload from __consumer_offsets, markers included: the
        # committed transaction's offset, and not the aborted one's (until the abort,
        # librdkafka's stable-offset fetch is answered UNSTABLE_OFFSET_COMMIT and retried).
        reader = Consumer({"bootstrap.servers": n.bootstrap, "group.id": "crash-group"})
        committed = wait_until(lambda: (lambda c: c if c[0].error is None else None)(
            reader.committed([TopicPartition("crash", 0)], 10)), 30, 0.5, "the offsets")
        assert committed[0].offset == 17
        reader.close()
        again.begin_transaction()
        send(again, "crash", "after", 3)
        again.commit_transaction(30)
        assert read(n, "crash", "read_committed", 11) == \
            sorted(values("before", 8) + values("after", 3))


def test_a_consume_transform_produce_pipeline_is_exactly_once(node) -> None:
    """Each batch read from ``eos-in`` is written doubled to ``eos-out`` and its offsets
    committed in the same transaction (send_offsets_to_transaction: AddOffsetsToTxn and
    TxnOffsetCommit). An aborted round leaves neither output nor offsets, so the group
    reads that batch again: at the end the output holds each input exactly once and the
    group's committed offsets are at the end of the input."""
    create(node, "eos-in")
    create(node, "eos-out")
    source = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(40):
        source.produce("eos-in", value=b"%d" % i, partition=i % PARTITIONS)
    assert source.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "eos",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe(["eos-in"])
    p = producer(node, "eos-pipeline")
    processed = 0
    aborted_once = False
    deadline = time.monotonic() + 60
    while processed < 40 and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(10, 0.5) if m.error() is None]
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            p.produce("eos-out", value=m.value() * 2, partition=m.partition())
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                      consumer.consumer_group_metadata(), 30)
        if not aborted_once:
            aborted_once = True
            p.flush(30)  # librdkafka#4849: an abort with records queued can fail
            p.abort_transaction(30)
            # Back to what the group committed: the batch is read again.
            committed = consumer.committed(consumer.assignment(), 10)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition,
                                             tp.offset if tp.offset >= 0 else 0))
            continue
        p.commit_transaction(30)
        processed += len(batch)
    assert processed == 40 and aborted_once
    committed = consumer.committed([TopicPartition("eos-in", p_, -1)
                                    for p_ in range(PARTITIONS)], 10)
    assert sum(tp.offset for tp in committed) == 40
    consumer.close()
    assert read(node, "eos-out", "read_committed", 40) == \
        sorted(b"%d" % i * 2 for i in range(40))


def test_a_commit_whose_markers_wait_completes_after_its_coordinator_is_killed(
        tmp_path) -> None:
    """kill -9 between PrepareCommit and the markers: the data partition's leader is
    stopped (SIGSTOP) so no marker can be written, the committed transaction's
    coordinator is killed -9 and restarted; it finds the PrepareCommit in
    __transaction_state and writes the markers once the leader is back, and the
    transaction becomes visible whole. Meanwhile the last stable offset holds it back."""
    import signal

    from tests.helpers import KRaftCluster

    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=2, broker_props={
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1"}).start()
    try:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "slow-marks"})
        p.init_transactions(60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        state = admin.list_topics("__transaction_state", timeout=10).topics
        coordinator = state["__transaction_state"].partitions[0].leader
        other = next(b for b in cluster.broker_ids if b != coordinator)
        for future in admin.create_topics([NewTopic(
                "marked", 1, replica_assignment=[[other]])]).values():
            future.result(30)
        wait_until(lambda: admin.list_topics("marked", timeout=5).topics["marked"]
                   .partitions[0].leader == other, 30, 0.2, "a leader for marked-0")
        p.begin_transaction()
        for i in range(5):
            p.produce("marked", value=b"m-%d" % i, partition=0)
        assert p.flush(30) == 0
        cluster.nodes[other].proc.send_signal(signal.SIGSTOP)
        try:
            p.commit_transaction(30)  # answered once PrepareCommit is in the log
            cluster.nodes[coordinator].kill9()
            cluster.nodes[coordinator].start()
        finally:
            cluster.nodes[other].proc.send_signal(signal.SIGCONT)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "marked",
                             "isolation.level": "read_committed"})
        consumer.assign([TopicPartition("marked", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert sorted(got) == [b"m-%d" % i for i in range(5)]
    finally:
        cluster.stop()


def test_a_transactional_write_outside_the_transaction_is_refused(node) -> None:
    """KIP-890 part 1: the leader asks the coordinator before a transactional batch opens
    a transaction on a partition; one the producer never added (or added to a
    transaction since aborted) is refused INVALID_TXN_STATE and leaves nothing open."""
    from ottla.protocol.api import ApiKey
    from ottla.protocol.records import build_batch
    from tests.helpers import WireClient

    create(node, "verified")
    with WireClient(node.bootstrap, timeout=10) as client:
        init = client.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": "raw-writer", "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1})
        assert init.error_code == 0
        batch = build_batch([(None, b"stray")], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0,
                            transactional=True)
        produced = client.request(ApiKey.PRODUCE, 9, {
            "transactional_id": "raw-writer", "acks": -1, "timeout": 10000,
            "topic_data": [{"name": "verified", "partition_data": [
                {"index": 0, "records": batch}]}]})
    (answer,) = produced.responses[0].partition_responses
    assert answer.error_code == 48  # INVALID_TXN_STATE
    p = producer(node, "verified-writer")
    p.begin_transaction()
    send(p, "verified", "ok", 2)
    p.commit_transaction(30)
    assert read(node, "verified", "read_committed", 2) == values("ok", 2)
