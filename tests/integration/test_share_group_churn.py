"""Share groups while their topics and members change, with librdkafka's ShareConsumer on
one real node: a topic deleted and made again under its name (its share state does not
outlive it), a subscribed topic deleted beside another, a member that unsubscribes, a
consumer acknowledging thousands of records with random types, and a ShareFetch that may
take nothing (MaxBytes 0)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey
from tests.helpers import OttlaProcess, WireClient, wait_until
from tests.integration.test_share_consumers import set_group_config
from tests.integration.test_share_groups import FAST, describe

LOCK_MS = 3000
"""The acquisition lock of the unsubscribe test's group."""


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("share-churn") / "data"), overrides={
        **FAST, "group.share.min.record.lock.duration.ms": "1000",
        # Every state write a snapshot, pruned every second: the state topic's log start
        # moves while the tests run.
        "share.coordinator.snapshot.update.records.per.snapshot": "0",
        "share.coordinator.state.topic.prune.interval.ms": "1000"})
    node.start()
    try:
        yield node
    finally:
        node.stop()


def admin(node: OttlaProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def create(node: OttlaProcess, *topics: str) -> None:
    client = admin(node)  # kept alive until the futures are done
    futures = client.create_topics([NewTopic(t, 1, 1) for t in topics], operation_timeout=30)
    for future in futures.values():
        future.result(30)


def delete(node: OttlaProcess, topic: str) -> None:
    client = admin(node)
    client.delete_topics([topic], operation_timeout=30)[topic].result(30)


def produce(node: OttlaProcess, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def topic_id(node: OttlaProcess, topic: str) -> uuid.UUID:
    with WireClient(node.bootstrap) as client:
        found = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics[0]
    assert found.error_code == 0, found
    return found.topic_id


def stored_start_offset(node: OttlaProcess, group: str, tid: uuid.UUID) -> int | None:
    """The share-partition start offset the share coordinator holds for partition 0 of
    the topic with id ``tid``; None when it holds no state for it."""
    with WireClient(node.bootstrap) as client:
        summary = client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
            "group_id": group, "topics": [{"topic_id": tid, "partitions": [
                {"partition": 0, "leader_epoch": -1}]}]})
    result = summary.results[0].partitions[0]
    return result.start_offset if result.error_code == 0 and result.start_offset >= 0 \
        else None


def settled_end(node: OttlaProcess, group: str, tid: uuid.UUID) -> int | None:
    """Where the records the share coordinator holds as delivered for good end (partition
    0): its start offset and the records settled above it (KIP-1226's delivery-complete
    count). An acknowledgement is stored with the start offset as it was before it, as
    Kafka stores it, so once every record is settled this is the log end while the stored
    start offset may not be."""
    with WireClient(node.bootstrap) as client:
        summary = client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
            "group_id": group, "topics": [{"topic_id": tid, "partitions": [
                {"partition": 0, "leader_epoch": -1}]}]})
    result = summary.results[0].partitions[0]
    if result.error_code != 0 or result.start_offset < 0:
        return None
    return result.start_offset + max(result.delivery_complete_count, 0)


def state_topic_log_start(node: OttlaProcess) -> int:
    """The largest log start offset among the partitions of ``__share_group_state``."""
    with WireClient(node.bootstrap) as client:
        response = client.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{
                "name": "__share_group_state", "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -2}
                    for p in range(50)]}]})
    return max(p.offset for t in response.topics for p in t.partitions if p.error_code == 0)


def consumer(node: OttlaProcess, group: str, topics: list[str],
             explicit: bool = True) -> ShareConsumer:
    conf = {"bootstrap.servers": node.bootstrap, "group.id": group,
            "topic.metadata.refresh.interval.ms": 500}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe(topics)
    return c


def assigned_topics(node: OttlaProcess, group: str) -> set[str]:
    return {tp.topic_name for m in describe(node, group).members
            for tp in m.assignment.topic_partitions if tp.partitions}


def test_a_topic_made_again_under_its_name_starts_afresh(node) -> None:
    """Share state is keyed by topic id: a member that stays subscribed while its topic
    is deleted and made again reads the new topic's records from its start, each for
    the first time (delivery count 1), and the old topic's state is deleted."""
    topic, group = "remade", "remade-g"
    create(node, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    c = consumer(node, group, [topic])
    try:
        got: list[tuple[bytes, int, int]] = []

        def poll_accept() -> None:
            messages = [m for m in c.poll(0.2) or [] if m.error() is None]
            for m in messages:
                got.append((m.value(), m.offset(), m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if messages:
                assert all(e is None for e in c.commit_sync(30).values())
        produce(node, topic, [b"old-%d" % i for i in range(5)])
        wait_until(lambda: poll_accept() or len(got) == 5, 30, 0,
                   message=lambda: f"old records: {got}")
        old_id = topic_id(node, topic)
        assert settled_end(node, group, old_id) == 5
        delete(node, topic)
        create(node, topic)
        assert topic_id(node, topic) != old_id
        produce(node, topic, [b"new-%d" % i for i in range(5)])
        wait_until(lambda: poll_accept() or len(got) == 10, 30, 0,
                   message=lambda: f"records after the topic was made again: {got}")
        assert got[5:] == [(b"new-%d" % i, i, 1) for i in range(5)]
        wait_until(lambda: stored_start_offset(node, group, old_id) is None, 30,
                   message="the deleted topic's share state to be deleted")
    finally:
        c.close()


def test_a_deleted_topic_leaves_the_assignment_and_the_other_keeps_flowing(node) -> None:
    """A member of two topics, one of which is deleted: the deleted one leaves the
    group's assignment and the member keeps receiving the other's records."""
    gone, kept, group = "gone", "kept", "two-topics-g"
    create(node, gone, kept)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    c = consumer(node, group, [gone, kept], explicit=False)
    try:
        wait_until(lambda: c.poll(0.2) is not None and
                   assigned_topics(node, group) == {gone, kept}, 30,
                   message=lambda: f"assignment {assigned_topics(node, group)}")
        delete(node, gone)
        values: list[bytes] = []

        def settled() -> bool:
            produce(node, kept, [b"k"])
            values.extend(m.value() for m in c.poll(0.2) or [] if m.error() is None)
            return bool(values) and assigned_topics(node, group) == {kept}
        wait_until(settled, 30, 0, message=lambda: f"assignment "
                   f"{assigned_topics(node, group)}, {len(values)} records of {kept}")
    finally:
        c.close()


def test_a_member_that_unsubscribes_leaves_and_its_records_come_back(node) -> None:
    """A member holding records unacknowledged unsubscribes: it leaves the group at once,
    and its records go to another member with delivery count 2 once their acquisition
    lock ends (its connection stays open, so its share session does too)."""
    topic, group = "unsub", "unsub-g"
    create(node, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    set_group_config(node, group, "share.record.lock.duration.ms", str(LOCK_MS))
    holder = consumer(node, group, [topic])
    other = None
    try:
        produce(node, topic, [b"h-%d" % i for i in range(5)])
        held: list[bytes] = []
        wait_until(lambda: held.extend(m.value() for m in holder.poll(0.2) or []
                                       if m.error() is None) or len(held) == 5, 30, 0,
                   message=lambda: f"held {held}")
        other = consumer(node, group, [topic], explicit=False)
        holder.unsubscribe()
        started = time.monotonic()
        wait_until(lambda: len(describe(node, group).members) == 1, 10,
                   message=lambda: f"members {describe(node, group).members}")
        back: list[tuple[bytes, int]] = []
        wait_until(lambda: back.extend((m.value(), m.delivery_count())
                                       for m in other.poll(0.2) or []
                                       if m.error() is None) or len(back) >= 5,
                   LOCK_MS / 1000 + 20, 0, message=lambda: f"came back: {back}")
        print(f"held records back {time.monotonic() - started:.1f} s after unsubscribe "
              f"(lock {LOCK_MS} ms)")
        assert sorted(back) == [(b"h-%d" % i, 2) for i in range(5)]
    finally:
        holder.close()
        if other is not None:
            other.close()


def test_random_acknowledgements_of_thousands_of_records(node) -> None:
    """One consumer acknowledges 5,000 records of one partition with random ACCEPT,
    RELEASE and REJECT: every record is delivered a first time, every released one again
    (delivery count 2) and accepted then, the rest never again; the share-partition
    is settled up to the log end. (The acknowledgement of thousands of runs once
    held the broker's event loop for minutes.)"""
    topic, group, total = "random-acks", "random-acks-g", 5000
    create(node, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    c = consumer(node, group, [topic])
    rng = random.Random(20261128)
    first: set[int] = set()
    released: set[int] = set()
    again: dict[int, int] = {}
    try:
        produce(node, topic, [str(i).encode() for i in range(total)])

        def round_() -> bool:
            messages = [m for m in c.poll(0.5) or [] if m.error() is None]
            for m in messages:
                value, count = int(m.value()), m.delivery_count()
                if count == 1:
                    assert value not in first, f"{value} delivered a first time twice"
                    first.add(value)
                    kind = rng.choice([AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                       AcknowledgeType.REJECT])
                    if kind == AcknowledgeType.RELEASE:
                        released.add(value)
                else:
                    again[value] = count
                    kind = AcknowledgeType.ACCEPT
                c.acknowledge(m, kind)
            if messages:
                assert all(e is None for e in c.commit_sync(30).values())
            return len(first) == total and set(again) >= released
        wait_until(round_, 60, 0, message=lambda: f"{len(first)} first deliveries, "
                   f"{len(set(again) & released)} of {len(released)} released back")
        assert set(again) == released and set(again.values()) == {2}
        wait_until(lambda: settled_end(node, group, topic_id(node, topic)) == total,
                   30, message="the settled records to reach the log end")
        # Each write was a snapshot: the share coordinator prunes its partition of
        # __share_group_state below the latest one.
        wait_until(lambda: state_topic_log_start(node) > 0, 30,
                   message="__share_group_state to be pruned")
    finally:
        c.close()


def test_a_share_fetch_with_max_bytes_zero_takes_no_records(node) -> None:
    """As Kafka (and as the Java client relies on when it only acknowledges): MaxBytes
    0 acquires nothing and answers at once, with records there and a long MaxWait."""
    # A raw ShareFetch, since no client library lets one set MaxBytes 0.
    topic, group = "zero-bytes", "zero-bytes-g"
    create(node, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    produce(node, topic, [b"a", b"b"])
    tid = topic_id(node, topic)
    member = "m-" + uuid.uuid4().hex[:8]
    with WireClient(node.bootstrap, timeout=20) as client:
        heartbeat = client.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [topic]})
        assert heartbeat.error_code == 0, heartbeat

        def fetch(epoch: int, max_bytes: int, wait_ms: int) -> list[tuple[int, int]]:
            response = client.request(ApiKey.SHARE_FETCH, 1, {
                "group_id": group, "member_id": member, "share_session_epoch": epoch,
                "max_wait": wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
                "max_records": 500, "batch_size": 500, "topics": [{"topic_id": tid,
                "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
                "forgotten_topics_data": []})
            assert response.error_code == 0, response
            return [(a.first_offset, a.last_offset) for t in response.responses
                    for p in t.partitions for a in p.acquired_records]
        # MaxWait of ten minutes: a fetch that waited would outlast the client's 20 s.
        assert fetch(0, 0, 600_000) == []
        assert fetch(1, 1 << 20, 5_000) == [(0, 1)]  # the records were there all along
