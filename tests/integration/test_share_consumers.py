"""Share groups (KIP-932) as their users see them, with librdkafka's ShareConsumer against
one real node: eight consumers of a two-partition topic each receiving records and
every record accepted exactly once; explicit acknowledgement (RELEASE redelivered with
its delivery count, REJECT and ACCEPT never again); and a consumer process killed with
kill -9 while it holds records, which come back to another member as soon as its
connection closes (as Kafka 4.1+ releases a share session's records), and one frozen
with SIGSTOP, whose records come back once their acquisition lock runs out."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ottla.protocol.api import ApiKey
from tests.helpers import OttlaProcess, WireClient, wait_until
from tests.integration.test_groups import produce, read_line
from tests.integration.test_share_groups import FAST, describe

SESSION_MS = 60_000
"""The share session timeout of the holder tests' groups (Kafka's largest by default,
group.share.max.session.timeout.ms): longer than any wait below, so that records that
come back while the holder is still a member were not released by its session expiring."""


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    """One node for the module; each test has its own topic and group. The broker's lower
    bound of the record lock is lowered so that a group may ask for a short one; the
    default stays Kafka's 30 s."""
    node = OttlaProcess(str(tmp_path_factory.mktemp("share-consumers") / "data"),
                        overrides={**FAST, "group.share.min.record.lock.duration.ms": "1000"})
    node.start()
    try:
        yield node
    finally:
        code = node.stop()
        assert code in (0, None), f"ottla exited with {code}:\n{node.log()}"


def create_topic(node, topic: str, partitions: int) -> None:
    with WireClient(node.bootstrap) as client:
        assert client.create_topic(topic, partitions=partitions).topics[0].error_code == 0


def share_consumer(node, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    conf = {"bootstrap.servers": node.bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(conf)
    consumer.subscribe([topic])
    return consumer


def share_start_offset(node, group: str, topic: str, partition: int) -> int | None:
    """The share-partition start offset the share coordinator holds (every record below
    it acknowledged or archived); None while the share-partition is not initialized."""
    with WireClient(node.bootstrap) as client:
        topic_id = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics[0].topic_id
        summary = client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
            "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, "leader_epoch": -1}]}]})
    result = summary.results[0].partitions[0]
    return result.start_offset if result.error_code == 0 and result.start_offset >= 0 \
        else None


def settled_end(node, group: str, topic: str, partition: int) -> int | None:
    """Where the records the share coordinator holds as delivered for good end: its start
    offset and the records settled above it (KIP-1226's delivery-complete count). An
    acknowledgement is stored with the start offset as it was before it, as Kafka stores
    it (the next write carries the one it moved), so once every record is settled this
    is the log end while the stored start offset may not be."""
    with WireClient(node.bootstrap) as client:
        topic_id = client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}).topics[0].topic_id
        summary = client.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {
            "group_id": group, "topics": [{"topic_id": topic_id, "partitions": [
                {"partition": partition, "leader_epoch": -1}]}]})
    result = summary.results[0].partitions[0]
    if result.error_code != 0 or result.start_offset < 0:
        return None
    return result.start_offset + max(result.delivery_complete_count, 0)


def end_offsets(node, topic: str, partitions: int) -> list[int]:
    with WireClient(node.bootstrap) as client:
        response = client.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                for p in range(partitions)]}]})
    return [p.offset for p in sorted(response.topics[0].partitions,
                                     key=lambda p: p.partition_index)]


def members_assigned(node, group: str, count: int) -> bool:
    """``count`` members in the group's assignment, each with a partition, at one epoch."""
    group = describe(node, group)
    return group.error_code == 0 and len(group.members) == count and \
        all(m.assignment.topic_partitions and m.assignment.topic_partitions[0].partitions
            for m in group.members) and len({m.member_epoch for m in group.members}) == 1


def test_eight_share_consumers_of_two_partitions_accept_every_record_once(node) -> None:
    """More consumers than partitions all work (the share assignor gives a partition to
    several members), and with implicit acknowledgement every one of 20,000 records is
    delivered once and accepted: no value twice, none missing, the share-partitions
    settled up to the end of the log."""
    topic, group, total, n = "eight", "eight-g", 20_000, 8
    create_topic(node, topic, 2)
    consumers = [share_consumer(node, group, topic) for _ in range(n)]
    got: list[list[tuple[str, int]]] = [[] for _ in range(n)]

    def poll_round() -> None:
        for consumer, seen in zip(consumers, got, strict=True):
            for m in consumer.poll(0.1) or []:
                if m.error() is None:
                    seen.append((m.value().decode(), m.delivery_count()))
    try:
        # share.auto.offset.reset=latest: every member in the assignment and both
        # share-partitions initialized (on a first fetch) before anything is produced.
        def ready() -> bool:
            poll_round()
            return members_assigned(node, group, n) and all(
                share_start_offset(node, group, topic, p) is not None for p in (0, 1))
        wait_until(ready, timeout=20, message=lambda: str(describe(node, group)))
        assert not any(got)
        # 10,000 records a partition in batches of at most 500, as a producer writing
        # steadily sends them: a share consumer leases whole batches (batch_optimized),
        # so a few huge batches (or a partition the sticky partitioner left nearly
        # empty) could not be spread over four members per partition.
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5,
                             "batch.num.messages": 500})
        for i in range(total):
            producer.produce(topic, str(i).encode(), partition=i % 2)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        started = time.monotonic()

        def all_received() -> bool:
            poll_round()
            return sum(map(len, got)) >= total
        wait_until(all_received, timeout=30, interval=0,
                   message=lambda: f"received {[len(g) for g in got]}")
        print(f"20,000 records to 8 share consumers in {time.monotonic() - started:.1f} s: "
              f"{[len(g) for g in got]}")
        # Implicit mode: commit_sync accepts the last poll's records. (close() alone would
        # not: librdkafka 2.16 ends its share session without acknowledging them, so the
        # broker releases them to the members still open.)
        for consumer in consumers:
            assert all(e is None for e in consumer.commit_sync(30).values())
        ends = end_offsets(node, topic, 2)
        assert sum(ends) == total

        def settled() -> list[int | None]:
            return [settled_end(node, group, topic, p) for p in (0, 1)]
        wait_until(lambda: settled() == ends, timeout=10,
                   message=lambda: f"settled up to {settled()}, log ends {ends}")
    finally:
        for consumer in consumers:
            consumer.close()
    values = [value for seen in got for value, _ in seen]
    assert len(values) == total, f"{len(values) - len(set(values))} delivered twice"
    assert set(values) == {str(i) for i in range(total)}
    assert {count for seen in got for _, count in seen} == {1}
    assert all(got), f"records per consumer: {[len(g) for g in got]}"


def test_explicit_release_comes_back_reject_and_accept_never_do(node) -> None:
    """Explicit acknowledgement with two members of one partition: a record RELEASEd at
    its first delivery is delivered again (to either member) with delivery count 2; a
    record REJECTed, and one ACCEPTed, is never delivered again."""
    topic, group, total = "explicit", "explicit-g", 30
    create_topic(node, topic, 1)
    consumers = [share_consumer(node, group, topic, explicit=True) for _ in range(2)]
    deliveries: dict[int, list[tuple[int, int]]] = {}
    """value -> (member, delivery count) of each delivery."""

    def kind(value: int, count: int) -> AcknowledgeType:
        if value % 3 == 0 and count == 1:
            return AcknowledgeType.RELEASE
        if value % 3 == 1:
            return AcknowledgeType.REJECT
        return AcknowledgeType.ACCEPT

    def poll_both() -> None:
        for i, consumer in enumerate(consumers):
            messages = [m for m in consumer.poll(0.1) or [] if m.error() is None]
            for m in messages:
                value = int(m.value())
                deliveries.setdefault(value, []).append((i, m.delivery_count()))
                consumer.acknowledge(m, kind(value, m.delivery_count()))
            if messages:
                results = consumer.commit_sync(30)
                assert all(e is None for e in results.values()), results
    try:
        def ready() -> bool:
            poll_both()
            return members_assigned(node, group, 2) and \
                share_start_offset(node, group, topic, 0) is not None
        wait_until(ready, timeout=30, message=lambda: str(describe(node, group)))
        produce(node, topic, total)
        released = {v for v in range(total) if v % 3 == 0}

        def settled() -> bool:
            poll_both()
            return set(deliveries) == set(range(total)) and \
                all(len(deliveries[v]) >= 2 for v in released)
        wait_until(settled, timeout=30, message=lambda: str(deliveries))
        # Negative check: nothing else may come back. A bounded observation window (with
        # the default 30 s lock, a record not acknowledged would not return within it,
        # but every record here was acknowledged and confirmed by commit_sync).
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            poll_both()
        settled_to = settled_end(node, group, topic, 0)
    finally:
        for consumer in consumers:
            consumer.close()
    for value, seen in sorted(deliveries.items()):
        counts = [count for _, count in seen]
        assert counts == ([1, 2] if value in released else [1]), (value, seen)
    assert settled_to == total  # every record accepted or archived (the rejected)
    members = {member for seen in deliveries.values() for member, _ in seen}
    print(f"members that received records: {sorted(members)}; redelivered to "
          f"{sorted({seen[1][0] for v, seen in deliveries.items() if v in released})}")


HOLDER = textwrap.dedent("""
    import json, sys, time
    from confluent_kafka import ShareConsumer
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    while True:
        messages = [m for m in c.poll(0.2) or [] if m.error() is None]
        if messages:  # held, never acknowledged (explicit mode: no further poll either)
            print(json.dumps([[m.offset(), m.delivery_count()] for m in messages]),
                  flush=True)
            break
    time.sleep(600)  # holds them until the test signals it (SIGKILL or SIGSTOP)
""")


def survivor_assigned(node, group: str, holder_id: str) -> bool:
    """A member other than the holder has the partition in its assignment."""
    return any(m.member_id != holder_id and m.assignment.topic_partitions and
               m.assignment.topic_partitions[0].partitions
               for m in describe(node, group).members)


def set_group_config(node, group: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def held_records_return(node, how: signal.Signals, name: str, lock_ms: int,
                        wait_s: float) -> tuple[float, float]:
    """A consumer process polls records in explicit mode and holds them unacknowledged,
    then gets ``how``: its records go to another member of the group with delivery count
    2, each once, while the holder is still a member (its session, SESSION_MS, has not
    run out, so that is not what released them). Seconds after the records were
    produced (their lock cannot have started earlier) until the first came back, and
    until the other member was in the group's assignment."""
    topic, group, total = name, f"{name}-g", 20
    create_topic(node, topic, 1)
    set_group_config(node, group, "share.record.lock.duration.ms", str(lock_ms))
    set_group_config(node, group, "share.session.timeout.ms", str(SESSION_MS))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, node.bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    survivor: ShareConsumer | None = None
    try:
        # The holder alone in the group (librdkafka fetches in the background, so another
        # member would take records too) and its share-partition initialized.
        def holder_ready() -> bool:
            assert holder.poll() is None, "the holder exited"
            return members_assigned(node, group, 1) and \
                share_start_offset(node, group, topic, 0) is not None
        wait_until(holder_ready, timeout=30, message=lambda: str(describe(node, group)))
        holder_id = describe(node, group).members[0].member_id
        produced = time.monotonic()
        produce(node, topic, total)
        line = read_line(holder, 20)
        held = {offset: count for offset, count in json.loads(line)}
        assert held and set(held.values()) == {1}, held
        holder.send_signal(how)
        if how == signal.SIGKILL:
            holder.wait(10)

        survivor = share_consumer(node, group, topic, explicit=True)
        got: dict[int, tuple[int, float]] = {}
        """offset -> (delivery count, seconds after the records were produced)."""
        again: list[int] = []
        joined: list[float] = []

        def poll_survivor() -> None:
            for m in survivor.poll(0.1) or []:
                if m.error() is None:
                    if m.offset() in got:
                        again.append(m.offset())
                    got[m.offset()] = (m.delivery_count(), time.monotonic() - produced)
                    survivor.acknowledge(m, AcknowledgeType.ACCEPT)

        def all_back() -> bool:
            poll_survivor()
            if not joined and survivor_assigned(node, group, holder_id):
                joined.append(time.monotonic() - produced)
            return set(got) >= set(range(total))
        wait_until(all_back, timeout=wait_s,
                   message=lambda: f"got {sorted(got)}, the holder had {sorted(held)}")
        members = {m.member_id for m in describe(node, group).members}
        assert holder_id in members, "the holder's session ran out: that released them"
        assert all(e is None for e in survivor.commit_sync(30).values())
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if survivor is not None:
            survivor.close()
    assert not again, f"delivered twice to the survivor: {again}"
    returned = {offset: got[offset] for offset in held}
    assert {count for count, _ in returned.values()} == {2}, returned
    first_back = min(at for _, at in returned.values())
    assert joined, first_back
    print(f"{len(held)} held records back {first_back:.2f} s after they were produced "
          f"(lock {lock_ms} ms, survivor in the group after {joined[0]:.2f} s)")
    return first_back, joined[0]


def test_records_of_a_consumer_killed_with_kill_9_return_when_its_connection_closes(
        node) -> None:
    """Kill -9: the kernel closes the consumer's connection, and the broker gives its
    records back at once (Kafka 4.1+'s share session disconnect listener), well before
    their acquisition lock would have run out. The lock and the session are 60 s and the
    wait 30 s: records back within it, the holder still a member, can only be the
    disconnect's doing."""
    held_records_return(node, signal.SIGKILL, "killed", lock_ms=60_000, wait_s=30)


def test_records_of_a_frozen_consumer_return_when_their_lock_runs_out(node) -> None:
    """SIGSTOP: the consumer's connection stays open but it acknowledges nothing; its
    records go to another member once their acquisition lock (the group's
    ``share.record.lock.duration.ms``, 15 s) has run out, not before, while the frozen
    consumer is still a member."""
    lock_s = 15.0
    first_back, joined = held_records_return(node, signal.SIGSTOP, "frozen",
                                             lock_ms=int(lock_s * 1000), wait_s=lock_s + 30)
    # The survivor was in the group and fetching before the locks could have run out
    # (a bound with 10 s to spare: it joins within a heartbeat or two), so when the
    # records came back is the lock's doing, not the join's.
    assert joined < lock_s, (joined, first_back)
    # The lock started after the records were produced: no earlier than lock_s after
    # that is a bound only a broker releasing early fails (0.1 s for timer granularity).
    assert first_back >= lock_s - 0.1, f"back {first_back:.2f} s after they were produced"
