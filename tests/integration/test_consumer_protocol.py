"""KIP-848 consumer groups (``group.protocol=consumer``) with librdkafka: server-side
assignment, incremental moves, fencing, and state that survives a restart."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from tests.helpers import WireClient, wait_until
from tests.integration.test_groups import CHILD, Member, produce, read_line, settle

PARTITIONS = 12
FAST = {"group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.session.timeout.ms": "6000",
        "group.consumer.assignment.interval.ms": "100"}


@pytest.fixture
def node(make_ottla):
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic("work", partitions=PARTITIONS).topics[0].error_code == 0
    return node


def member(node, group: str, **conf: object) -> Member:
    m = Member(node, group, "work", **{"group.protocol": "consumer", **conf})
    m.cooperative = True  # KIP-848 assignments are always incremental
    return m


def describe(node, group: str):
    from ottla.protocol.api import ApiKey
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_server_side_assignment_moves_partitions_incrementally(node, assignor) -> None:
    members = [member(node, f"kip848-{assignor}", **{"group.remote.assignor": assignor})
               for _ in range(3)]
    try:
        settle(members, PARTITIONS, sizes=[4, 4, 4])
        before = [set(m.assigned) for m in members]
        members.append(member(node, f"kip848-{assignor}", **{"group.remote.assignor":
                                                            assignor}))
        settle(members, PARTITIONS, sizes=[3, 3, 3, 3])
        if assignor == "uniform":
            # Sticky and incremental: old members only lose partitions, never swap them.
            for m, owned in zip(members[:3], before, strict=True):
                assert m.assigned <= owned
        def stable():
            for m in members:
                m.poll()
            found = describe(node, f"kip848-{assignor}")
            return found if found.group_state == "Stable" else None
        described = wait_until(stable, 20, 0.0, "the group to be stable")
        assert described.assignor_name == assignor
        assert len(described.members) == 4
        assert {m.member_epoch for m in described.members} == {described.assignment_epoch}
    finally:
        for m in members:
            m.close()


def test_a_killed_member_is_fenced_and_its_partitions_move(node) -> None:
    survivor = member(node, "kip848-fence")
    child = subprocess.Popen([sys.executable, "-c", CHILD.replace(
        '"session.timeout.ms": 6000, "heartbeat.interval.ms": 500',
        '"group.protocol": "consumer"'), node.bootstrap, "kip848-fence", "work"],
        stdout=subprocess.PIPE, text=True)
    try:
        settle([survivor], PARTITIONS // 2)
        assert read_line(child, 10) == "assigned"
        child.kill()
        child.wait(10)
        killed_at = time.monotonic()
        settle([survivor], PARTITIONS, timeout=30)
        assert time.monotonic() - killed_at > 4  # the 6 s session timeout had to pass
        assert len(describe(node, "kip848-fence").members) == 1
    finally:
        if child.poll() is None:
            child.kill()
        survivor.close()


def test_commits_and_group_state_survive_a_restart(node) -> None:
    produce(node, "work", 240)
    m = member(node, "kip848-durable")
    settle([m], PARTITIONS)
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 240 and time.monotonic() < deadline:
        msg = m.consumer.poll(0.2)
        if msg is not None and not msg.error():
            seen += 1
    m.consumer.commit(asynchronous=False)
    before = describe(node, "kip848-durable")
    assert before.group_state == "Stable" and len(before.members) == 1
    m.close()  # leaves the group (epoch -1)
    after_leave = describe(node, "kip848-durable")
    assert after_leave.group_state == "Empty"

    node.stop()
    node.start()
    reloaded = describe(node, "kip848-durable")
    assert reloaded.group_state == "Empty"
    assert reloaded.group_epoch == after_leave.group_epoch
    reader = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "kip848-durable"})
    committed = wait_until(lambda: reader.committed(
        [TopicPartition("work", p) for p in range(PARTITIONS)], timeout=10), 20)
    assert sum(tp.offset for tp in committed) == 240
    reader.close()


def test_exactly_once_across_a_kip848_rebalance(node) -> None:
    total = 50_000
    produce(node, "work", total)
    seen: Counter[bytes] = Counter()

    def consume(m: Member, budget: int) -> int:
        got = 0
        while got < budget:
            batch = m.consumer.consume(500, 0.1)
            if not batch:
                return got
            for msg in batch:
                if not msg.error():
                    seen[msg.value()] += 1
                    got += 1
            try:
                m.consumer.commit(asynchronous=False)
            except KafkaException as e:
                # Sent just after the member gave up partitions, the commit may carry the
                # old epoch, which KIP-848 refuses (and librdkafka does not retry); the
                # revoke callback already committed the moved partitions and a later
                # commit covers the rest.
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    raise
        return got

    first = member(node, "kip848-eos", commit_on_revoke=True)
    settle([first], PARTITIONS)
    consume(first, 10_000)
    second = member(node, "kip848-eos", commit_on_revoke=True)
    by_second = 0
    deadline = time.monotonic() + 120
    while sum(seen.values()) < total and time.monotonic() < deadline:
        consume(first, 1000)
        by_second += consume(second, 1000)
    first.close()
    second.close()
    assert by_second > 0
    assert sum(seen.values()) == total and max(seen.values()) == 1
