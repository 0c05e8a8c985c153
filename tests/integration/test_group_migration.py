"""Online migration between the group protocols with librdkafka consumers: a group of
``group.protocol=classic`` consumers is rolled one consumer at a time to
``group.protocol=consumer`` (the classic group becomes a consumer group when the first
one joins) and back (the consumer group becomes a classic group again when the last
consumer-protocol member leaves), while a numbered stream is produced and consumed. Every
record is consumed and committed, and no partition is ever owned by two consumers at once
(as the consumers' own assign/revoke callbacks tell it)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import WireClient, wait_until

TOPIC, GROUP, PARTITIONS = "migrate", "rolling", 6


@pytest.fixture
def node(make_ottla):
    node = make_ottla(**{"group.consumer.heartbeat.interval.ms": "500",
                         "group.consumer.session.timeout.ms": "6000",
                         "group.consumer.assignment.interval.ms": "100",
                         "group.initial.rebalance.delay.ms": "0"})
    with WireClient(node.bootstrap) as c:
        assert c.create_topic(TOPIC, partitions=PARTITIONS).topics[0].error_code == 0
    return node


def describe(node):
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {
            "group_ids": [GROUP], "include_authorized_operations": False}).groups[0]


class Ledger:
    """What every consumer was given and gave up, when; and every value consumed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str, set[int]]] = []  # (time, who, what, parts)
        self.seen: set[int] = set()

    def record(self, who: str, what: str, partitions: set[int]) -> None:
        with self.lock:
            self.events.append((time.monotonic(), who, what, partitions))

    def owned(self) -> dict[str, set[int]]:
        with self.lock:
            events = list(self.events)
        owned: dict[str, set[int]] = defaultdict(set)
        for _, who, what, partitions in events:
            if what == "assign":
                owned[who] |= partitions
            else:
                owned[who] -= partitions
        return owned

    def overlaps(self) -> list[str]:
        """Pairs of ownership intervals of one partition by two consumers that intersect.
        An interval starts when the assign callback starts and ends when the revoke (or
        lost) callback returns, or when the consumer's close returns."""
        intervals: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
        since: dict[tuple[str, int], float] = {}
        with self.lock:
            events = sorted(self.events)
        for at, who, what, partitions in events:
            for p in partitions:
                if what == "assign":
                    since.setdefault((who, p), at)
                elif (who, p) in since:
                    intervals[p].append((since.pop((who, p)), at, who))
        for (who, p), start in since.items():
            intervals[p].append((start, float("inf"), who))
        found = []
        for p, spans in intervals.items():
            spans.sort()
            for (s1, e1, w1), (s2, e2, w2) in itertools.pairwise(spans):
                if s2 < e1:
                    found.append(f"partition {p}: {w1} [{s1:.3f}, {e1:.3f}] and "
                                 f"{w2} [{s2:.3f}, {e2:.3f}]")
        return found


class Worker:
    """A consumer polling in its own thread, recording its callbacks in the ledger."""

    def __init__(self, node, ledger: Ledger, name: str, protocol: str) -> None:
        self.name, self.ledger = name, ledger
        conf: dict[str, object] = {
            "bootstrap.servers": node.bootstrap, "group.id": GROUP,
            "group.protocol": protocol, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                         "partition.assignment.strategy": "range"})
        self.consumer = Consumer(conf)
        self.stop = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ledger.record(self.name, "assign", {p.partition for p in partitions})

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        try:
            consumer.commit(asynchronous=False)  # hand over what was processed
        except KafkaException:
            pass  # nothing to commit, or a commit the rebalance outdated: at least once
        self.ledger.record(self.name, "revoke", {p.partition for p in partitions})

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.ledger.record(self.name, "lost", {p.partition for p in partitions})

    def _run(self) -> None:
        self.consumer.subscribe([TOPIC], on_assign=self._assign, on_revoke=self._revoke,
                                on_lost=self._lost)
        while not self.stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is not None and not msg.error():
                with self.ledger.lock:
                    self.ledger.seen.add(int(msg.value()))
        self.consumer.close()  # revokes, commits and leaves the group
        owned = self.ledger.owned().get(self.name, set())
        self.ledger.record(self.name, "closed", owned)
        self.closed.set()

    def close(self) -> None:
        self.stop.set()
        assert self.closed.wait(30), f"{self.name} did not close"
        self.thread.join(5)


class NumberedStream:
    """Produces 0, 1, 2, ... until stopped (or a bound), while the group is rolled."""

    def __init__(self, node, bound: int = 60_000) -> None:
        self.producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        self.count, self.bound = 0, bound
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set() and self.count < self.bound:
            for _ in range(50):
                self.producer.produce(TOPIC, str(self.count).encode(),
                                      partition=self.count % PARTITIONS)
                self.count += 1
            self.producer.poll(0)
            time.sleep(0.02)  # the writer's pace: a steady stream while the group rolls
        assert self.producer.flush(30) == 0

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(40)
        return self.count


def test_consumers_roll_from_classic_to_consumer_and_back_without_a_stop(node) -> None:
    ledger = Ledger()
    live: dict[str, Worker] = {}

    def settle(sizes: list[int], what: str) -> None:
        def balanced() -> bool:
            owned = ledger.owned()
            mine = [owned.get(name, set()) for name in live]
            every = [p for ps in mine for p in ps]
            return sorted(every) == list(range(PARTITIONS)) and \
                sorted(map(len, mine)) == sizes
        wait_until(balanced, 30, 0.05, lambda: f"{what}: {dict(ledger.owned())}")

    def start(name: str, protocol: str) -> None:
        live[name] = Worker(node, ledger, name, protocol)

    def stop(name: str) -> None:
        live.pop(name).close()

    started = time.monotonic()
    for name in ("classic-1", "classic-2", "classic-3"):
        start(name, "classic")
    settle([2, 2, 2], "three classic consumers")
    stream = NumberedStream(node)
    try:
        # Upgrade: replace the classic consumers one by one.
        for i in (1, 2, 3):
            stop(f"classic-{i}")
            settle([3, 3], f"after classic-{i} left")
            start(f"consumer-{i}", "consumer")
            settle([2, 2, 2], f"after consumer-{i} joined")
            # A consumer group now, its classic members in it (member type 0).
            described = describe(node)
            assert described.error_code == 0
            assert sorted(m.member_type for m in described.members) == \
                sorted([1] * i + [0] * (3 - i))
        # Downgrade: and back.
        for i in (1, 2, 3):
            stop(f"consumer-{i}")
            settle([3, 3], f"after consumer-{i} left")
            start(f"classic-{i}-again", "classic")
            settle([2, 2, 2], f"after classic-{i}-again joined")
        # The last consumer-protocol member left: a classic group again.
        assert describe(node).error_code == ErrorCode.group_id_not_found
    finally:
        total = stream.finish()
    assert total > 0
    try:
        wait_until(lambda: len(ledger.seen) == total, 30, 0.1,
                   lambda: f"all {total} records (seen {len(ledger.seen)})")
        assert ledger.seen == set(range(total))
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        ends = {p: total // PARTITIONS + (1 if p < total % PARTITIONS else 0)
                for p in range(PARTITIONS)}

        def committed() -> dict[int, int]:
            request = [ConsumerGroupTopicPartitions(GROUP)]
            result = admin.list_consumer_group_offsets(request)[GROUP].result()
            return {tp.partition: tp.offset for tp in result.topic_partitions
                    if tp.topic == TOPIC}
        wait_until(lambda: committed() == ends, 20, 0.2,
                   lambda: f"committed offsets {committed()} to reach {ends}")
    finally:
        for name in list(live):
            stop(name)
    assert ledger.overlaps() == []
    # The conversions happened: the classic group was upgraded and downgraded again.
    log = node.log()
    assert "Upgrading classic group rolling" in log
    assert "Downgrading consumer group rolling" in log
    assert time.monotonic() - started < 180  # a bound on the whole, not a speed target
