"""Consumer groups with real clients: the classic protocol with each client-side assignor,
committed offsets across a restart, failure detection, static membership, and the admin
APIs."""

from __future__ import annotations

import asyncio
import select
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from ottla.protocol.errors import ErrorCode
from ottla.protocol.records import build_batch
from tests.helpers import WireClient, wait_until

PARTITIONS = 12


@pytest.fixture
def topic(ottla):
    with WireClient(ottla.bootstrap) as c:
        assert c.create_topic("work", partitions=PARTITIONS).topics[0].error_code == 0
    return "work"


def produce(node, topic: str, count: int, prefix: str = "") -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"{prefix}{i}".encode(), key=str(i).encode())
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


class Member:
    """A confluent-kafka consumer that records what it was assigned and revoked."""

    def __init__(self, node, group: str, topic: str, commit_on_revoke: bool = False,
                 **conf: object) -> None:
        self.commit_on_revoke = commit_on_revoke
        self.cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"
        self.assigned: set[tuple[str, int]] = set()
        self.revoked: list[set[tuple[str, int]]] = []
        timeouts = {} if conf.get("group.protocol") == "consumer" else \
            {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}  # KIP-848: broker side
        self.consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  **timeouts, **conf})
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self.cooperative:
            self.assigned |= {(p.topic, p.partition) for p in partitions}
        else:
            self.assigned = {(p.topic, p.partition) for p in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        if self.commit_on_revoke:
            # Hand over what was processed before the partitions go (Kafka's documented
            # pattern for no duplicates across a rebalance).
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as e:
                if e.args[0].code() != KafkaError._NO_OFFSET:
                    raise
        self.revoked.append(gone)
        self.assigned -= gone

    def poll(self) -> None:
        self.consumer.poll(0.05)

    def close(self) -> None:
        self.consumer.close()


def settle(members: list[Member], expected: int, timeout: float = 45,
           sizes: list[int] | None = None) -> None:
    """Poll every member until they own exactly ``expected`` partitions between them, each
    owned once (and, if given, ``sizes`` partitions each, in any order)."""
    def balanced() -> bool:
        for m in members:
            m.poll()
        owned = Counter(tp for m in members for tp in m.assigned)
        return len(owned) == expected and max(owned.values()) == 1 and \
            all(m.assigned for m in members) and \
            (sizes is None or sorted(len(m.assigned) for m in members) == sizes)
    wait_until(balanced, timeout, 0.0, "the group to settle")


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_classic_group_spreads_partitions_and_moves_incrementally(ottla, topic,
                                                                   strategy) -> None:
    members = [Member(ottla, f"g-{strategy}", topic, **{"partition.assignment.strategy":
                                                        strategy}) for _ in range(3)]
    try:
        settle(members, PARTITIONS, sizes=[4, 4, 4])
        before = [set(m.assigned) for m in members]
        revoked_before = [len(m.revoked) for m in members]
        members.append(Member(ottla, f"g-{strategy}", topic,
                              **{"partition.assignment.strategy": strategy}))
        settle(members, PARTITIONS, sizes=[3, 3, 3, 3])
        if strategy == "cooperative-sticky":
            # Incremental: a member only ever gives up partitions that move away.
            for m, owned in zip(members[:3], before, strict=True):
                assert m.assigned <= owned
                for gone in m.revoked[revoked_before[members.index(m)]:]:
                    assert not gone & m.assigned
    finally:
        for m in members:
            m.close()


def test_committed_offsets_survive_a_restart(ottla, topic) -> None:
    produce(ottla, topic, 120)
    member = Member(ottla, "durable", topic)
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 120 and time.monotonic() < deadline:
        msg = member.consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen += 1
    assert seen == 120
    member.consumer.commit(asynchronous=False)
    committed = member.consumer.committed([TopicPartition(topic, p) for p in
                                           range(PARTITIONS)], timeout=10)
    assert sum(tp.offset for tp in committed) == 120
    member.close()

    ottla.stop()
    ottla.start()
    reader = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "durable"})
    after = wait_until(lambda: reader.committed(
        [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10), 20)
    assert [(tp.partition, tp.offset) for tp in after] == \
        [(tp.partition, tp.offset) for tp in committed]
    reader.close()


CHILD = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    assigned = []
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: assigned.extend(ps))
    while True:
        c.poll(0.1)
        if assigned:
            print("assigned", flush=True)
            assigned.clear()
""")


def read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """A line of a child's stdout, waiting at most ``timeout`` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output from the child within {timeout}s"
    return proc.stdout.readline().strip()


def test_a_member_killed_without_leaving_is_fenced_after_its_session_timeout(ottla,
                                                                            topic) -> None:
    survivor = Member(ottla, "fencing", topic)
    child = subprocess.Popen([sys.executable, "-c", CHILD, ottla.bootstrap, "fencing", topic],
                             stdout=subprocess.PIPE, text=True)
    try:
        settle([survivor], PARTITIONS // 2, timeout=45)
        assert read_line(child, 10) == "assigned"
        child.kill()
        child.wait(10)
        killed_at = time.monotonic()
        settle([survivor], PARTITIONS, timeout=45)
        # Not before the 6 s session timeout: the coordinator had to notice the silence.
        assert time.monotonic() - killed_at > 4
    finally:
        if child.poll() is None:
            child.kill()
        survivor.close()


def test_static_member_restart_keeps_its_assignment_without_rebalance(ottla, topic) -> None:
    conf = {"group.instance.id": "static-a", "session.timeout.ms": 30000}
    first = Member(ottla, "static", topic, **conf)
    other = Member(ottla, "static", topic)
    settle([first, other], PARTITIONS)
    mine = set(first.assigned)
    # Which member joined first is up to the clients' threads: the one that did may have
    # held every partition and given them back once the other arrived. Count from here.
    revoked_before = len(other.revoked)
    first.consumer.close()  # a static member's close does not leave the group
    again = Member(ottla, "static", topic, **conf)
    settle([again, other], PARTITIONS)
    assert again.assigned == mine
    assert other.revoked[revoked_before:] == []
    again.close()
    other.close()


def test_exactly_once_across_a_rebalance_with_synchronous_commits(ottla, topic) -> None:
    total = 100_000
    produce(ottla, topic, total)
    group = "exactly-once"
    seen: Counter[bytes] = Counter()

    def consume(member: Member, budget: int) -> int:
        got = 0
        while got < budget:
            batch = member.consumer.consume(500, 0.2)
            if not batch:
                return got
            for msg in batch:
                if not msg.error():
                    seen[msg.value()] += 1
                    got += 1
            try:
                member.consumer.commit(asynchronous=False)
            except KafkaException as e:
                # A commit that races a rebalance is refused; the positions stay with the
                # member and are committed by the next commit or when revoked.
                assert e.args[0].name() in ("REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION")
        return got

    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(ottla, group, topic, commit_on_revoke=True, **conf)
    settle([first], PARTITIONS)
    consume(first, 30_000)
    second = Member(ottla, group, topic, commit_on_revoke=True, **conf)
    deadline = time.monotonic() + 120
    by_second = 0
    while sum(seen.values()) < total and time.monotonic() < deadline:
        consume(first, 1000)
        by_second += consume(second, 1000)
    first.close()
    second.close()
    assert by_second > 0, "the rebalance never handed partitions to the second member"
    assert sum(seen.values()) == total
    assert len(seen) == total and max(seen.values()) == 1


def test_admin_lists_describes_and_deletes_groups(ottla, topic) -> None:
    produce(ottla, topic, 24)
    member = Member(ottla, "admin-g", topic, **{"client.id": "describer"})
    settle([member], PARTITIONS)
    member.consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    admin = AdminClient({"bootstrap.servers": ottla.bootstrap})

    listed = admin.list_consumer_groups().result(10)
    states = {g.group_id: g.state.name for g in listed.valid}
    assert states["admin-g"] == "STABLE"

    described = admin.describe_consumer_groups(["admin-g"])["admin-g"].result(10)
    assert described.state.name == "STABLE"
    assert described.partition_assignor == "range"
    assert [m.client_id for m in described.members] == ["describer"]
    assert len(described.members[0].assignment.topic_partitions) == PARTITIONS

    with pytest.raises(KafkaException) as busy:
        admin.delete_consumer_groups(["admin-g"])["admin-g"].result(10)
    assert busy.value.args[0].name() == "NON_EMPTY_GROUP"
    member.close()

    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("admin-g")])
    listed_offsets = offsets["admin-g"].result(10).topic_partitions
    assert [(tp.partition, tp.offset) for tp in listed_offsets] == [(0, 5)]

    wait_until(lambda: admin.describe_consumer_groups(["admin-g"])["admin-g"].result(10)
               .state.name == "EMPTY", 20)
    admin.delete_consumer_groups(["admin-g"])["admin-g"].result(10)
    listed = admin.list_consumer_groups().result(10)
    assert "admin-g" not in {g.group_id for g in listed.valid}


def test_simple_commits_without_joining(ottla, topic) -> None:
    consumer = Consumer({"bootstrap.servers": ottla.bootstrap, "group.id": "simple",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 3, 42)], asynchronous=False)
    assert consumer.committed([TopicPartition(topic, 3)], timeout=10)[0].offset == 42
    consumer.close()
    # Clients cannot write into the coordinator's log.
    with WireClient(ottla.bootstrap) as client:
        junk = build_batch([(b"junk", b"junk")], timestamp=int(time.time() * 1000))
        result = client.produce("__consumer_offsets", 0, junk).responses[0]
        assert result.partition_responses[0].error_code == ErrorCode.invalid_topic_exception


def test_kafka_python_group(ottla, topic) -> None:
    from kafka import KafkaConsumer

    produce(ottla, topic, 50)
    consumer = KafkaConsumer(topic, bootstrap_servers=ottla.bootstrap, group_id="kp",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=15000)
    values = set()
    for msg in consumer:
        values.add(msg.value)
        if len(values) == 50:
            break
    consumer.commit()
    assert len(values) == 50
    assert sum(consumer.committed(tp) or 0 for tp in consumer.assignment()) == 50
    consumer.close()


def test_aiokafka_group(ottla, topic) -> None:
    from aiokafka import AIOKafkaConsumer

    produce(ottla, topic, 50)

    async def run() -> int:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=ottla.bootstrap, group_id="aio",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = 0
            while got < 50:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                got += sum(len(b) for b in batches.values())
            await consumer.commit()
            committed = 0
            for tp in consumer.assignment():
                committed += await consumer.committed(tp) or 0
            return committed
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == 50
