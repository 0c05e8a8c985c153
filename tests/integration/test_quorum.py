"""KRaft across processes: three controllers and brokers, each its own ``ottla server``
from its own server.properties, formatted by ``ottla storage format``, driven by real
clients, and killed with SIGKILL."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.protocol.api import ApiKey
from tests.helpers import KRaftCluster, WireClient, wait_until

pytestmark = pytest.mark.slow


def admin(cluster: KRaftCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 5000})


def create(cluster: KRaftCluster, topics: list[NewTopic], timeout: float = 60) -> None:
    """Create topics through a broker, retrying while the controller quorum settles
    (a forwarded request may meet an election); an earlier attempt that did commit
    shows up as TOPIC_ALREADY_EXISTS."""
    pending = {t.topic: t for t in topics}

    def attempt() -> bool:
        client = admin(cluster)  # kept alive until the futures are done
        for name, future in client.create_topics(list(pending.values()),
                                                 operation_timeout=10).items():
            try:
                future.result(15)
                pending.pop(name)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" in str(e) or "already exists" in str(e):
                    pending.pop(name)
        return not pending
    wait_until(attempt, timeout, 0.5, f"topics {sorted(pending)} to be created")


def topics_on(node, names: set[str]) -> bool:
    """Whether the broker ``node`` lists every topic in ``names``."""
    with WireClient(node.bootstrap, timeout=5) as client:
        response = client.request(ApiKey.METADATA, 12, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})
    return names <= {t.name for t in response.topics}


def metadata(node, topic: str):
    with WireClient(node.bootstrap, timeout=5) as client:
        return client.request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False})


def kill_and_wait_for_new_leader(cluster: KRaftCluster, leader: int) -> tuple[int, float]:
    before = cluster.describe_quorum().leader_epoch
    cluster.nodes[leader].kill9()
    started = time.monotonic()

    def new_leader() -> int | None:
        q = cluster.describe_quorum()
        return q.leader_id if q.leader_id not in (-1, leader) and q.leader_epoch > before \
            else None
    elected = wait_until(new_leader, 30, 0.1, "a new active controller")
    return elected, time.monotonic() - started


def registered_controllers(cluster: KRaftCluster, via: int) -> list[tuple[int, str, int]]:
    """DescribeCluster for the controllers (KIP-919, endpoint_type 2) on ``via``'s
    controller listener, as ``kafka-metadata-quorum --bootstrap-controller`` asks it."""
    with WireClient(cluster.nodes[via].controller, timeout=5) as client:
        response = client.request(ApiKey.DESCRIBE_CLUSTER, 2, {
            "include_cluster_authorized_operations": False, "endpoint_type": 2,
            "include_fenced_brokers": False})
    assert response.error_code == 0, response
    assert all(b.rack is None and not b.is_fenced for b in response.brokers)
    return sorted((b.broker_id, b.host, b.port) for b in response.brokers)


def registrations_logged(node) -> set[str]:
    """The incarnation ids ``node`` logged registering as a controller under."""
    return set(re.findall(r"Controller \d+ registered \(incarnation ([0-9a-f-]+)\)",
                          node.log(200_000)))


def produce_and_consume(cluster: KRaftCluster, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    return sorted(seen)


def test_losing_the_active_controller_loses_no_topic(tmp_path) -> None:
    cluster = KRaftCluster(str(tmp_path), controllers=3, brokers=2)
    try:
        cluster.start()
        leader = cluster.leader()
        quorum = cluster.describe_quorum()
        assert sorted(v.replica_id for v in quorum.current_voters) == [1, 2, 3]
        # Every controller registers itself (KIP-919), and each lists all three.
        controllers = [(c, "127.0.0.1", cluster.nodes[c].controller_port)
                       for c in cluster.controller_ids]
        for c in cluster.controller_ids:
            wait_until(lambda c=c: registered_controllers(cluster, c) == controllers, 20, 0.2,
                       f"controller {c} to list every controller's registration")
        wait_until(lambda: sorted(o.replica_id for o in cluster.describe_quorum().observers)
                   == [101, 102], 15, 0.2, "both brokers to follow the metadata log")
        first = {f"before-{i}" for i in range(5)}
        create(cluster, [NewTopic(t, 2, 1) for t in sorted(first)])
        expected = [f"before-0-{i}".encode() for i in range(20)]
        assert produce_and_consume(cluster, "before-0", 20) == sorted(expected)

        elected, took = kill_and_wait_for_new_leader(cluster, leader)
        print(f"controller {leader} killed; {elected} active after {took:.2f} s")
        second = {f"after-{i}" for i in range(5)}
        create(cluster, [NewTopic(t, 2, 1) for t in sorted(second)])
        for broker in cluster.broker_ids:
            wait_until(lambda b=broker: topics_on(cluster.nodes[b], first | second), 20, 0.2,
                       f"broker {broker} to list every topic")
        assert produce_and_consume(cluster, "after-0", 10) == \
            sorted(f"after-0-{i}".encode() for i in range(10))

        # The killed controller comes back and catches up with the leader's log.
        cluster.nodes[leader].start(wait=True)
        target = cluster.describe_quorum().high_watermark

        def caught_up() -> bool:
            q = cluster.describe_quorum()
            ends = {v.replica_id: v.log_end_offset for v in q.current_voters}
            return ends[leader] >= target
        wait_until(caught_up, 30, 0.2, f"controller {leader} to catch up")
        # Its new incarnation registers again, and every controller still lists it.
        wait_until(lambda: len(registrations_logged(cluster.nodes[leader])) == 2, 30, 0.2,
                   f"controller {leader} to register its new incarnation")
        for c in cluster.controller_ids:
            wait_until(lambda c=c: registered_controllers(cluster, c) == controllers, 20, 0.2,
                       f"controller {c} to list every controller after the restart")

        status = subprocess.run(
            [sys.executable, "-m", "ottla", "metadata-quorum", "--bootstrap-server",
             cluster.broker(101).bootstrap, "describe", "--status"],
            capture_output=True, text=True, timeout=30)
        assert status.returncode == 0, status.stderr
        assert re.search(rf"LeaderId:\s+{elected}\b", status.stdout), status.stdout
        assert re.search(r"CurrentObservers:.*101.*102", status.stdout), status.stdout
    finally:
        cluster.stop()


def snapshot_files(node) -> list[tuple[int, int]]:
    found = []
    for path in glob.glob(os.path.join(node.data_dir, "__cluster_metadata-0",
                                       "*.checkpoint")):
        end, epoch = os.path.basename(path).split(".")[0].split("-")
        if int(end) > 0:
            found.append((int(end), int(epoch)))
    return sorted(found)


def test_a_controller_far_behind_catches_up_from_a_snapshot(tmp_path) -> None:
    cluster = KRaftCluster(str(tmp_path), controllers=3, brokers=1, controller_props={
        "metadata.log.max.record.bytes.between.snapshots": "4096"})
    try:
        cluster.start()
        leader = cluster.leader()
        behind = next(i for i in cluster.controller_ids if i != leader)
        cluster.nodes[behind].kill9()
        names = {f"topic-{i:02d}" for i in range(30)}
        create(cluster, [NewTopic(t, 3, 1) for t in sorted(names)])
        # The others snapshot and drop their log before it: the laggard cannot fetch it.
        wait_until(lambda: snapshot_files(cluster.nodes[leader]), 20, 0.2,
                   "the leader to write a snapshot")
        leader_snapshot = snapshot_files(cluster.nodes[leader])[-1]
        assert not [s for s in snapshot_files(cluster.nodes[behind])
                    if s >= leader_snapshot]

        cluster.nodes[behind].start(wait=True)
        wait_until(lambda: "Loaded the metadata snapshot" in cluster.nodes[behind].log(), 30,
                   0.2, f"controller {behind} to load the leader's snapshot")
        target = cluster.describe_quorum().high_watermark
        wait_until(lambda: {v.replica_id: v.log_end_offset for v in
                            cluster.describe_quorum().current_voters}[behind] >= target,
                   30, 0.2, f"controller {behind} to catch up")

        # With the old leader gone, the quorum of the other two (one of them the one that
        # came back through a snapshot) still knows every topic and creates more.
        kill_and_wait_for_new_leader(cluster, leader)
        create(cluster, [NewTopic("after-failover", 1, 1)])
        wait_until(lambda: topics_on(cluster.broker(), names | {"after-failover"}), 20, 0.2,
                   "every topic to be listed after the failover")
        client = admin(cluster)
        again = client.create_topics([NewTopic("topic-00", 3, 1)])["topic-00"]
        with pytest.raises(Exception, match=r"already exists|TOPIC_ALREADY_EXISTS"):
            again.result(30)
    finally:
        cluster.stop()


def test_a_killed_broker_is_fenced_and_its_partitions_lose_their_leader(tmp_path) -> None:
    session = 3000
    # Brokers heartbeat every 500 ms (default 2000), so a live one has slack in the session.
    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=2, controller_props={
        "broker.session.timeout.ms": str(session)}, broker_props={
        "broker.heartbeat.interval.ms": "500"})
    try:
        cluster.start()
        a, b = cluster.broker(101), cluster.broker(102)
        create(cluster, [NewTopic("placed", 2, replica_assignment=[[101], [102]])])
        wait_until(lambda: {p.partition_index: p.leader_id for p in
                            metadata(a, "placed").topics[0].partitions} == {0: 101, 1: 102},
                   20, 0.2, "both partitions to have their leaders")
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(10):
            producer.produce("placed", value=b"kept-%d" % i, partition=1)
        assert producer.flush(30) == 0

        b.kill9()
        killed = time.monotonic()
        wait_until(lambda: {p.partition_index: p.leader_id for p in
                            metadata(a, "placed").topics[0].partitions} == {0: 101, 1: -1},
                   session / 1000 + 10, 0.1, "partition 1 to lose its fenced leader")
        fenced_after = time.monotonic() - killed
        print(f"broker 102 fenced {fenced_after:.2f} s after kill -9 (session {session} ms)")
        assert {x.node_id for x in metadata(a, "placed").brokers} == {101}

        b.start(wait=True)
        wait_until(lambda: metadata(a, "placed").topics[0].partitions[1].leader_id == 102, 20,
                   0.2, "broker 102 to lead partition 1 again")
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "check",
                             "auto.offset.reset": "earliest"})
        from confluent_kafka import TopicPartition
        consumer.assign([TopicPartition("placed", 1, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.close()
        assert values == [b"kept-%d" % i for i in range(10)]
    finally:
        cluster.stop()
