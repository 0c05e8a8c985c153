"""Share groups (KIP-932) with librdkafka's ShareConsumer against a real node: membership
through ShareGroupHeartbeat, seen with ShareGroupDescribe and ListGroups, two share
consumers of one group receiving the records, leaving, and deleting the empty group."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ottla.protocol.api import ApiKey
from tests.helpers import WireClient, wait_until
from tests.integration.test_groups import produce

FAST = {"group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "6000"}


@pytest.fixture
def node(make_ottla):
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic("queue", partitions=2).topics[0].error_code == 0
    return node


def share_consumer(node, group: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    consumer.subscribe(["queue"])
    return consumer


def describe(node, group: str):
    with WireClient(node.bootstrap) as client:
        return client.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {
            "group_ids": [group], "include_authorized_operations": False}).groups[0]


def list_share_groups(node) -> list[tuple[str, str, str]]:
    with WireClient(node.bootstrap) as client:
        groups = client.request(ApiKey.LIST_GROUPS, 5, {
            "states_filter": [], "types_filter": ["share"]}).groups
    return [(g.group_id, g.group_state, g.group_type) for g in groups]


def assignments(group) -> list[set[int]]:
    return [{p for tp in m.assignment.topic_partitions for p in tp.partitions}
            for m in group.members]


def poll_all(consumers: list[ShareConsumer], got: list[list[str]]) -> None:
    for consumer, seen in zip(consumers, got, strict=True):
        for message in consumer.poll(0.2) or []:
            if message.error() is None:
                seen.append(message.value().decode())


def test_two_share_consumers_join_share_the_records_and_leave(node) -> None:
    consumers = [share_consumer(node, "sg"), share_consumer(node, "sg")]
    got: list[list[str]] = [[], []]
    try:
        def both_assigned():
            poll_all(consumers, got)  # the heartbeats run while the consumers poll
            group = describe(node, "sg")
            return group.error_code == 0 and len(group.members) == 2 and \
                all(assignments(group)) and \
                len({m.member_epoch for m in group.members}) == 1 and group
        group = wait_until(both_assigned, timeout=30, message=lambda: str(describe(node, "sg")))
        assert group.group_state == "Stable" and group.assignor_name == "simple"
        assert sorted(map(sorted, assignments(group))) == [[0], [1]]
        assert group.members[0].assignment.topic_partitions[0].topic_name == "queue"
        assert list_share_groups(node) == [("sg", "Stable", "share")]

        # Each share-partition starts at the end of the log on first fetch
        # (share.auto.offset.reset=latest): let both fetch once before producing.
        def both_initialized():
            poll_all(consumers, got)
            return all(node_has_share_partition(node, "sg", p) for p in (0, 1))
        wait_until(both_initialized, timeout=30, message="both share-partitions initialized")
        produce(node, "queue", 200)

        def all_received():
            poll_all(consumers, got)
            return len(got[0]) + len(got[1]) >= 200
        wait_until(all_received, timeout=60,
                   message=lambda: f"received {len(got[0])} + {len(got[1])}")
        assert sorted(got[0] + got[1], key=int) == [str(i) for i in range(200)]
        assert got[0] and got[1]  # both members received records

        consumers.pop().close()  # leaves with member epoch -1
        def one_left():
            poll_all(consumers, [got[0]])
            group = describe(node, "sg")
            return len(group.members) == 1 and assignments(group) == [{0, 1}]
        wait_until(one_left, timeout=20, message=lambda: str(describe(node, "sg")))
    finally:
        for consumer in consumers:
            consumer.close()
    wait_until(lambda: describe(node, "sg").group_state == "Empty", timeout=20)
    assert list_share_groups(node) == [("sg", "Empty", "share")]
    with WireClient(node.bootstrap) as client:
        deleted = client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg"]})
    assert deleted.results[0].error_code == 0
    assert describe(node, "sg").error_code == 69  # GROUP_ID_NOT_FOUND


def share_start_offset(node, group: str, partition: int) -> int:
    """The share-partition start offset the share coordinator holds (-1: none yet)."""
    with WireClient(node.bootstrap) as client:
        topic_id = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": "queue", "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics[0].topic_id
        summary = client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
            "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, "leader_epoch": -1}]}]})
    return summary.results[0].partitions[0].start_offset


def node_has_share_partition(node, group: str, partition: int) -> bool:
    """The share coordinator holds state for the group's share-partition."""
    return share_start_offset(node, group, partition) >= 0


def explicit_consumer(node, group: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["queue"])
    return consumer


def test_accepted_records_stay_accepted_across_kill_9_of_the_broker(make_ottla) -> None:
    """Seed 001's durability: an acknowledgement the broker confirmed is in
    ``__share_group_state`` before the member hears of it, so after a kill -9 and a
    restart no confirmed record is delivered again, released records come back with
    their delivery counts, and every record is eventually accepted once."""
    node = make_ottla(**FAST)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic("queue", partitions=2).topics[0].error_code == 0
    total = 400
    first = explicit_consumer(node, "durable")
    try:
        # share.auto.offset.reset=latest: the share-partitions start on a first fetch.
        def started() -> bool:
            first.poll(0.2)
            return all(node_has_share_partition(node, "durable", p) for p in (0, 1))
        wait_until(started, timeout=30, message="share-partitions initialized")
        produce(node, "queue", total)
        confirmed: set[int] = set()
        released: set[int] = set()
        deadline = time.monotonic() + 60
        while len(confirmed) < total // 3 and time.monotonic() < deadline:
            accepted = []
            for m in first.poll(0.5) or []:
                if m.error() is not None:
                    continue
                value = int(m.value())
                if value % 7 == 0 and m.delivery_count() == 1:
                    first.acknowledge(m, AcknowledgeType.RELEASE)
                    released.add(value)
                else:
                    first.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.append(value)
            if accepted or released:
                results = first.commit_sync(30)
                if all(error is None for error in results.values()):
                    confirmed.update(accepted)
        assert len(confirmed) >= total // 3, f"only {len(confirmed)} accepted in time"
        node.kill9()
    finally:
        first.close()
    node.start()

    second = explicit_consumer(node, "durable")
    delivered: dict[int, int] = {}
    try:
        def everything_accepted() -> bool:
            for m in second.poll(0.5) or []:
                if m.error() is None:
                    value = int(m.value())
                    delivered[value] = m.delivery_count()
                    second.acknowledge(m, AcknowledgeType.ACCEPT)
            second.commit_sync(30)
            return confirmed | set(delivered) == set(range(total))
        wait_until(everything_accepted, timeout=90,
                   message=lambda: f"{len(confirmed)} + {len(delivered)} of {total}")
    finally:
        second.close()
    again = confirmed & set(delivered)
    assert not again, f"confirmed before the kill, delivered again: {sorted(again)[:10]}"
    redelivered = {v: c for v, c in delivered.items() if v in released}
    assert redelivered and all(count >= 2 for count in redelivered.values()), redelivered


def set_group_configs(node, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_a_poison_record_ends_in_the_dead_letter_queue_once(make_ottla) -> None:
    """KIP-1191: a record released at every delivery, and one rejected, go to the group's
    dead-letter queue once each, with the source's key and value (copying is on) and the
    ``__dlq.errors.*`` headers; then the share-partition start offset moves past them."""
    node = make_ottla(**FAST, **{"group.share.delivery.count.limit": "2",
                                 "group.share.min.delivery.count.limit": "2",
                                 "errors.deadletterqueue.auto.create.topics.enable": "true"})
    subprocess.run([sys.executable, "-m", "ottla", "features", "--bootstrap-server",
                    node.bootstrap, "upgrade", "--feature", "share.version=2"],
                   check=True, capture_output=True, timeout=60)
    with WireClient(node.bootstrap) as c:
        assert c.create_topic("queue", partitions=1).topics[0].error_code == 0
    set_group_configs(node, "dlq-group", errors_deadletterqueue_topic_name="dlq.queue",
                      errors_deadletterqueue_copy_record_enable="true")
    consumer = explicit_consumer(node, "dlq-group")
    try:
        wait_until(lambda: consumer.poll(0.2) is not None and
                   node_has_share_partition(node, "dlq-group", 0), timeout=30,
                   message="share-partition initialized")
        producer = Producer({"bootstrap.servers": node.bootstrap})
        for i, value in enumerate([b"ok-0", b"ok-1", b"poison", b"reject-me", b"ok-4"]):
            producer.produce("queue", value, key=b"k%d" % i)
        assert producer.flush(30) == 0
        accepted: set[bytes] = set()

        def settled() -> bool:
            for m in consumer.poll(0.3) or []:
                if m.error() is not None:
                    continue
                kind = {b"poison": AcknowledgeType.RELEASE,
                        b"reject-me": AcknowledgeType.REJECT}.get(m.value(),
                                                                AcknowledgeType.ACCEPT)
                consumer.acknowledge(m, kind)
                if kind == AcknowledgeType.ACCEPT:
                    accepted.add(m.value())
            consumer.commit_sync(30)
            return share_start_offset(node, "dlq-group", 0) == 5
        wait_until(settled, timeout=60, message=lambda: (
            f"start offset {share_start_offset(node, 'dlq-group', 0)}, accepted {accepted}"))
    finally:
        consumer.close()
    assert accepted == {b"ok-0", b"ok-1", b"ok-4"}
    dead = read_topic(node, "dlq.queue", expected=2)
    assert sorted((m.key(), m.value()) for m in dead) == [(b"k2", b"poison"),
                                                         (b"k3", b"reject-me")]
    headers = {m.value(): {k: v.decode() for k, v in m.headers() or []} for m in dead}
    assert headers[b"poison"] == {
        "__dlq.errors.topic": "queue", "__dlq.errors.partition": "0",
        "__dlq.errors.offset": "2", "__dlq.errors.group": "dlq-group",
        "__dlq.errors.delivery.count": "2",
        "__dlq.errors.message": "Delivery count exceeded"}
    assert headers[b"reject-me"]["__dlq.errors.offset"] == "3"
    assert headers[b"reject-me"]["__dlq.errors.delivery.count"] == "1"
    assert headers[b"reject-me"]["__dlq.errors.message"] == "Record rejected by the consumer"


def read_topic(node, topic: str, expected: int, settle: float = 1.0) -> list:
    """Every record of ``topic`` from the start: until ``expected`` arrived, then
    ``settle`` seconds more to see any that should not be there."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"read-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list = []
    deadline, settled = time.monotonic() + 30, None
    while time.monotonic() < (settled or deadline):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message)
        if settled is None and len(got) >= expected:
            settled = time.monotonic() + settle
    consumer.close()
    return got
