"""Replication across broker processes: partitions with three replicas on three brokers,
written by an idempotent librdkafka producer with ``acks=all`` while their leaders are
killed with SIGKILL and restarted. Nothing acknowledged is lost, duplicated or reordered;
a killed broker catches up and rejoins the ISR."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from ottla.broker.coordinators.coordinator_service import partition_for
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import KRaftCluster, WireClient, free_port, wait_until
from tests.integration.test_quorum import create
from tests.kafka_ref.verifiable import VerifiableClient

pytestmark = pytest.mark.slow

BROKERS = (101, 102, 103)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KRaftCluster]:
    """Three controllers and three brokers, shared by the module's tests. Brokers are fenced
    three seconds after their last heartbeat, so a killed leader is replaced quickly."""
    c = KRaftCluster(str(tmp_path_factory.mktemp("replication")), controllers=3, brokers=3,
                     controller_props={"broker.session.timeout.ms": "3000"},
                     broker_props={"broker.heartbeat.interval.ms": "500",
                                   "replica.lag.time.max.ms": "5000",
                                   "replica.fetch.backoff.ms": "200",
                                   "offsets.topic.replication.factor": "3",
                                   "replica.selector.class": "org.apache.kafka.common."
                                                             "replica.RackAwareReplicaSelector"})
    for broker in c.broker_ids:  # each broker in a rack of its own (KIP-392 test)
        with open(c.nodes[broker].config_file, "a", encoding="utf-8") as f:
            f.write(f"broker.rack=rack-{broker}\n")
    c.start()
    yield c
    c.stop()


def partitions(cluster: KRaftCluster, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, ISR) as a live broker's Metadata reports them."""
    for broker in cluster.broker_ids:
        node = cluster.nodes[broker]
        if node.proc is None:
            continue
        try:
            with WireClient(node.bootstrap, timeout=5) as client:
                response = client.request(ApiKey.METADATA, 12, {
                    "topics": [{"name": topic, "topic_id": None}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False})
        except OSError:
            continue
        (t,) = response.topics
        if t.error_code != 0 or not t.partitions:
            continue  # this broker has not applied the topic's creation yet
        return {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                for p in t.partitions}
    raise AssertionError(f"no broker knows {topic}")


def full_isr(cluster: KRaftCluster, topic: str) -> bool:
    described = partitions(cluster, topic)
    return bool(described) and all(len(isr) == 3 and leader >= 0
                                   for leader, _, isr in described.values())


def consume_all(cluster: KRaftCluster, topic: str, expected: int, timeout: float = 60
                ) -> dict[int, list[bytes]]:
    """Every record of ``topic`` read from the start, by partition (assigned: no group, so
    no coordinator is needed while a broker is down)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False})
    count = len(partitions(cluster, topic))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(count)])
    got: dict[int, list[bytes]] = defaultdict(list)
    deadline = time.monotonic() + timeout
    total = 0
    try:
        while total < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                if message.error() is None:
                    got[message.partition()].append(message.value())
                    total += 1
    finally:
        consumer.close()
    return got


def test_acks_all_waits_for_three_replicas_and_a_new_leader_has_every_record(
        cluster: KRaftCluster) -> None:
    create(cluster, [NewTopic("replicated", 2, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: full_isr(cluster, "replicated"), 30, 0.2, "three in-sync replicas")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(300):
        producer.produce("replicated", key=str(i % 2).encode(), value=b"%d" % i,
                         partition=i % 2)
    assert producer.flush(30) == 0
    before = partitions(cluster, "replicated")
    killed = before[0][0]
    cluster.nodes[killed].kill9()
    wait_until(lambda: partitions(cluster, "replicated")[0][0] not in (-1, killed), 30, 0.2,
               "a new leader for partition 0")
    got = consume_all(cluster, "replicated", 300)
    assert got[0] == [b"%d" % i for i in range(0, 300, 2)]
    assert got[1] == [b"%d" % i for i in range(1, 300, 2)]
    cluster.nodes[killed].start()
    wait_until(lambda: full_isr(cluster, "replicated"), 60, 0.5,
               lambda: f"the restarted broker back in the ISR: {partitions(cluster, 'replicated')}")


class NumberedProducer:
    """Writes a numbered stream to every partition, idempotent with ``acks=all``, on a
    thread, and records what the brokers acknowledged."""

    def __init__(self, cluster: KRaftCluster, topic: str, partitions: int) -> None:
        self.producer = Producer({
            "bootstrap.servers": ",".join(cluster.nodes[b].bootstrap for b in BROKERS),
            "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000})
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[int, list[int]] = defaultdict(list)
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        if error is not None:
            self.failed.append(str(error))
        else:
            self.acked[message.partition()].append(int(message.value()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < 20000:
            for p in range(self.partitions):
                try:
                    self.producer.produce(self.topic, value=b"%d" % self.sent, partition=p,
                                          on_delivery=self._delivered)
                except BufferError:
                    self.producer.poll(0.1)
                    continue
                self.sent += 1
            self.producer.poll(0.005)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def acknowledged(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.producer.flush(120) == 0


def test_killing_leaders_under_load_loses_and_duplicates_nothing(cluster: KRaftCluster) -> None:
    """Two rounds: kill -9 the leader of a partition (the second time with the active
    controller), let the new leaders take writes, restart the broker, wait until it is
    back in every ISR."""
    create(cluster, [NewTopic("numbered", 3, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: full_isr(cluster, "numbered"), 30, 0.2, "three in-sync replicas")
    producer = NumberedProducer(cluster, "numbered", 3).start()
    try:
        for round_ in range(2):
            wait_until(lambda r=round_: producer.acknowledged() > 300 * (r + 1), 60, 0.1,
                       "records acknowledged before the kill")
            victim = partitions(cluster, "numbered")[round_ % 3][0]
            cluster.nodes[victim].kill9()
            if round_ == 1:  # and the active controller with it: a new one fences it
                controller = cluster.leader()
                cluster.nodes[controller].kill9()
                cluster.nodes[controller].start()
            wait_until(lambda v=victim: all(leader not in (-1, v) for leader, _, _ in
                                            partitions(cluster, "numbered").values()),
                       30, 0.2, "new leaders for the killed broker's partitions")
            count = producer.acknowledged()
            wait_until(lambda c=count: producer.acknowledged() > c + 100, 60, 0.1,
                       "writes acknowledged by the new leaders")
            cluster.nodes[victim].start()
            wait_until(lambda: full_isr(cluster, "numbered"), 60, 0.5,
                       lambda: f"the killed broker back in sync: "
                               f"{partitions(cluster, 'numbered')}")
    finally:
        producer.stop()
    assert producer.failed == []
    acked = producer.acked
    print(f"acknowledged {producer.acknowledged()} of {producer.sent} sent")
    got = consume_all(cluster, "numbered", producer.acknowledged())
    for p in range(3):
        values = [int(v) for v in got[p]]
        assert len(values) == len(set(values)), f"duplicates in partition {p}"
        assert values == sorted(values), f"partition {p} out of order"
        assert set(acked[p]) <= set(values), f"partition {p} lost acknowledged records"


def test_with_two_replicas_down_acks_all_is_refused_not_enough_replicas(
        cluster: KRaftCluster) -> None:
    create(cluster, [NewTopic("fragile", 1, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: full_isr(cluster, "fragile"), 30, 0.2, "three in-sync replicas")
    leader, replicas, _ = partitions(cluster, "fragile")[0]
    followers = [r for r in replicas if r != leader]
    for f in followers:
        cluster.nodes[f].kill9()
    try:
        wait_until(lambda: partitions(cluster, "fragile")[0][2] == [leader], 30, 0.2,
                   "the ISR down to the leader")
        for flag in ("--under-replicated-partitions", "--under-min-isr-partitions"):
            described = subprocess.run(
                [sys.executable, "-m", "ottla", "topics", "--bootstrap-server",
                 cluster.nodes[leader].bootstrap, "--describe", "--topic", "fragile", flag],
                capture_output=True, text=True, timeout=60)
            assert described.returncode == 0, described.stderr
            (line,) = described.stdout.splitlines()
            assert f"Partition: 0\tLeader: {leader}" in line and f"Isr: {leader}\t" in line
        producer = Producer({"bootstrap.servers": cluster.nodes[leader].bootstrap,
                             "acks": "all", "message.timeout.ms": 3000, "retries": 0})
        errors: list[KafkaError] = []
        producer.produce("fragile", value=b"x",
                         on_delivery=lambda e, m: errors.append(e))
        producer.flush(10)
        assert errors and errors[0] is not None
        assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
        consumer = Consumer({"bootstrap.servers": cluster.nodes[leader].bootstrap,
                             "group.id": "fragile-check"})
        low, high = consumer.get_watermark_offsets(TopicPartition("fragile", 0), timeout=10)
        consumer.close()
        assert (low, high) == (0, 0)
    finally:
        for f in followers:
            cluster.nodes[f].start()
    wait_until(lambda: full_isr(cluster, "fragile"), 60, 0.5, "the followers back in sync")


def test_a_group_keeps_its_offsets_when_its_coordinator_is_killed(
        cluster: KRaftCluster) -> None:
    create(cluster, [NewTopic("grouped", 1, 3)])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivors",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("grouped", 0, 7)], asynchronous=False)
    consumer.close()
    index = partition_for("survivors", 50)
    coordinator = partitions(cluster, "__consumer_offsets")[index][0]
    cluster.nodes[coordinator].kill9()
    try:
        wait_until(lambda: partitions(cluster, "__consumer_offsets")[index][0]
                   not in (-1, coordinator), 30, 0.2, "a new leader of the group's partition")

        def committed() -> int | None:
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "survivors"})
            try:
                (tp,) = c.committed([TopicPartition("grouped", 0)], timeout=5)
                return tp.offset if tp.offset >= 0 else None
            except KafkaException:
                return None
            finally:
                c.close()
        assert wait_until(committed, 60, 0.5, "the committed offset after failover") == 7
    finally:
        cluster.nodes[coordinator].start()


def find_coordinator(cluster: KRaftCluster, transactional_id: str) -> int | None:
    """The broker a live broker's FindCoordinator names for ``transactional_id``."""
    for broker in cluster.broker_ids:
        node = cluster.nodes[broker]
        if node.proc is None:
            continue
        try:
            with WireClient(node.bootstrap, timeout=5) as client:
                response = client.request(ApiKey.FIND_COORDINATOR, 4, {
                    "key_type": 1, "coordinator_keys": [transactional_id]})
        except OSError:
            continue
        (found,) = response.coordinators
        return found.node_id if found.error_code == 0 else None
    return None


def read(cluster: KRaftCluster, topic: str, isolation: str, expected: int,
         settle: float = 1.0, timeout: float = 30) -> list[bytes]:
    """Every value a consumer with ``isolation`` gets from ``topic`` (assigned, no group),
    sorted: until ``expected`` arrived, then ``settle`` seconds more for anything that
    should not be there."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions(cluster, topic)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    settled: float | None = None
    try:
        while time.monotonic() < (settled or deadline):
            got += [m.value() for m in consumer.consume(100, 0.2) if m.error() is None]
            if settled is None and len(got) >= expected:
                settled = time.monotonic() + settle
    finally:
        consumer.close()
    return sorted(got)


def test_a_transaction_left_open_by_a_killed_coordinator_is_aborted_by_the_next(
        cluster: KRaftCluster) -> None:
    """__transaction_state has three replicas (transaction.state.log.replication.factor
    defaults to 3, min ISR 2). Transaction A is committed, B is open with records
    written when the broker coordinating the transactional id is killed -9: a new
    producer instance with the same id is initialized by a coordinator on another broker,
    which aborts B (read_committed never sees it, read_uncommitted does) and then commits
    C; the old instance is fenced."""
    txn_id = "failover-writer"
    create(cluster, [NewTopic("txn-failover", 2, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: full_isr(cluster, "txn-failover"), 30, 0.2, "three in-sync replicas")

    def send(p: Producer, prefix: str, n: int) -> list[bytes]:
        sent = [b"%s-%d" % (prefix.encode(), i) for i in range(n)]
        for i, value in enumerate(sent):
            p.produce("txn-failover", value=value, partition=i % 2)
        assert p.flush(30) == 0
        return sent

    old = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    old.init_transactions(60)
    state = partitions(cluster, "__transaction_state")
    assert len(state) == 50 and all(len(replicas) == 3 for _, replicas, _ in state.values())
    assert topic_config(cluster, "__transaction_state", "min.insync.replicas") == "2"
    index = partition_for(txn_id, 50)
    wait_until(lambda: full_isr(cluster, "__transaction_state"), 60, 0.5,
               "__transaction_state fully in sync")
    old.begin_transaction()
    a = send(old, "A", 10)
    old.commit_transaction(30)
    old.begin_transaction()
    b = send(old, "B", 6)
    coordinator = partitions(cluster, "__transaction_state")[index][0]
    assert find_coordinator(cluster, txn_id) == coordinator
    cluster.nodes[coordinator].kill9()
    try:
        started = time.monotonic()
        new = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
        new.init_transactions(30)  # fences the old instance, aborts B
        took = time.monotonic() - started
        successor = wait_until(lambda: (lambda leader: leader if leader not in (
            -1, coordinator) else None)(partitions(cluster, "__transaction_state")[index][0]),
            10, 0.2, "the new coordinator in the metadata")
        assert find_coordinator(cluster, txn_id) == successor
        new.begin_transaction()
        c = send(new, "C", 4)
        new.commit_transaction(30)
        # C readable means the last stable offset passed B: B was ended, and not seen.
        assert read(cluster, "txn-failover", "read_committed", len(a + c)) == sorted(a + c)
        assert read(cluster, "txn-failover", "read_uncommitted", len(a + b + c)) == \
            sorted(a + b + c)
        with pytest.raises(KafkaException) as fenced:
            old.commit_transaction(10)
        assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
        print(f"\ninit_transactions against the new coordinator {successor} took "
              f"{took:.1f} s")
    finally:
        cluster.nodes[coordinator].start()
    wait_until(lambda: full_isr(cluster, "__transaction_state") and
               full_isr(cluster, "txn-failover"), 60, 0.5,
               lambda: "the restarted broker back in sync: "
                       f"{partitions(cluster, '__transaction_state')}")


def test_a_leader_killed_with_unreplicated_records_truncates_them_when_it_returns(
        cluster: KRaftCluster) -> None:
    """The followers are paused (SIGSTOP) while the leader takes acks=1 writes they never
    fetch; the leader is killed, a follower takes over and is written to. When the old
    leader returns it finds its last epoch ends earlier on the new leader, cuts its log
    there and replicates the new records: made leader again (preferred election), it
    serves none of the records only it had."""
    create(cluster, [NewTopic("diverged", 1, 3, config={"min.insync.replicas": "1"})])
    wait_until(lambda: full_isr(cluster, "diverged"), 30, 0.2, "three in-sync replicas")
    old_leader, replicas, _ = partitions(cluster, "diverged")[0]
    followers = [r for r in replicas if r != old_leader]

    def produce(values: list[bytes], acks: str) -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks,
                             "linger.ms": 0})
        for v in values:
            producer.produce("diverged", value=v, partition=0)
        assert producer.flush(30) == 0

    produce([b"kept-%d" % i for i in range(10)], "all")
    # Ready before the followers stop: stopped longer than broker.session.timeout.ms
    # (3 s here) they would be fenced and leave the ISR, and no follower could lead.
    stale = Producer({"bootstrap.servers": cluster.nodes[old_leader].bootstrap,
                      "acks": "1", "linger.ms": 0})
    stale.list_topics("diverged", timeout=10)
    for f in followers:
        os.kill(cluster.nodes[f].proc.pid, signal.SIGSTOP)
    try:
        # A fetch the followers had parked at the leader is answered (empty) within
        # replica.fetch.wait.max.ms (500 ms); stopped, they send no other. After that
        # bound nothing the leader appends can reach them. This sleep stays: whether a
        # stopped follower's last fetch has been answered shows nowhere outside it (the
        # node reports no purgatory), so it waits out twice the protocol's bound.
        time.sleep(1.0)
        for i in range(5):
            stale.produce("diverged", value=b"stale-%d" % i, partition=0)
        assert stale.flush(30) == 0
        cluster.nodes[old_leader].kill9()
    finally:
        for f in followers:
            os.kill(cluster.nodes[f].proc.pid, signal.SIGCONT)
    wait_until(lambda: partitions(cluster, "diverged")[0][0] in followers, 30, 0.2,
               "a follower leading")
    produce([b"new-%d" % i for i in range(5)], "all")
    cluster.nodes[old_leader].start()
    wait_until(lambda: full_isr(cluster, "diverged"), 60, 0.5, "the old leader back in sync")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    assert replicas[0] == old_leader  # a new topic's first leader is its preferred replica
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("diverged", 0)]).result(30)
    wait_until(lambda: partitions(cluster, "diverged")[0][0] == old_leader, 30, 0.2,
               "the old leader leading again")
    got = consume_all(cluster, "diverged", 15)[0]
    assert got == [b"kept-%d" % i for i in range(10)] + [b"new-%d" % i for i in range(5)]


def test_a_follower_behind_the_leaders_log_start_starts_over_there(
        cluster: KRaftCluster) -> None:
    """A follower down while the leader's log start moves past everything it has fetches
    OFFSET_OUT_OF_RANGE, which (as on Kafka 4.4) carries no watermarks: it asks the leader
    ListOffsets (the log end, then the log start), starts its log over at the leader's
    log start and rejoins the ISR."""
    create(cluster, [NewTopic("moved-start", 1, 3, config={"min.insync.replicas": "1"})])
    wait_until(lambda: full_isr(cluster, "moved-start"), 30, 0.2, "three in-sync replicas")
    leader, replicas, _ = partitions(cluster, "moved-start")[0]
    behind = next(r for r in replicas if r != leader)
    cluster.nodes[behind].kill9()
    try:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "linger.ms": 0})
        for i in range(10):
            producer.produce("moved-start", value=b"old-%d" % i, partition=0)
        assert producer.flush(30) == 0  # once the dead follower has left the ISR
        with WireClient(cluster.nodes[leader].bootstrap) as client:
            deleted = client.request(ApiKey.DELETE_RECORDS, 2, {
                "timeout": 30000, "topics": [{"name": "moved-start", "partitions": [
                    {"partition_index": 0, "offset": 10}]}]})
        assert deleted.topics[0].partitions[0].low_watermark == 10
    finally:
        cluster.nodes[behind].start()
    producer.produce("moved-start", value=b"new", partition=0)
    assert producer.flush(30) == 0
    wait_until(lambda: full_isr(cluster, "moved-start"), 60, 0.5,
               "the follower back in sync")
    assert os.path.exists(os.path.join(cluster.nodes[behind].data_dir, "moved-start-0",
                                       f"{10:020d}.log"))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_taken(data: Path) -> bool:
    """A node of the dev cluster at ``data`` could not bind its port."""
    return any("address already in use" in log.read_text(errors="replace")
               for log in data.glob("node-*.log"))


def _run_dev_cluster(data: Path, last_try: bool) -> bool:
    """One ``ottla dev-cluster`` run at ``data`` on ports found free; False if a node
    could not bind its port after all (and this is not the last try)."""
    base = wait_until(lambda: next((p for p in (free_port() for _ in range(20))
                                    if p < 65000 and all(_bindable(p + d)
                                                         for d in (1, 100))), None),
                      10, 0.1, "free ports for the cluster")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ottla", "dev-cluster", "--brokers", "2", "--data-dir",
         str(data), "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert "bootstrap servers: " in lines[1], lines
        metrics = dict(re.findall(r"node (\d+) (http://\S+/metrics)", lines[2]))
        assert sorted(metrics) == ["1", "101", "102"], lines
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{base},127.0.0.1:{base + 1}"})
        serving = wait_until(lambda: "taken" if _port_taken(data) else
                             len(admin.list_topics(timeout=5).brokers) == 2, 60, 0.5,
                             "both brokers serving")
        if serving == "taken" and not last_try:
            return False
        assert serving is True, "a node of the dev cluster could not bind its port"
        admin.create_topics([NewTopic("walk", 2)])["walk"].result(30)
        topic = wait_until(lambda: (lambda t: t if t.error is None and len(t.partitions) == 2
                                    else None)(admin.list_topics("walk", timeout=5)
                                               .topics["walk"]),
                           30, 0.2, "the topic's partitions")
        assert {len(p.replicas) for p in topic.partitions.values()} == {2}
        with urllib.request.urlopen(metrics["1"], timeout=5) as response:
            assert b"kafka_controller_kafkacontroller_activecontrollercount 1.0" in \
                response.read()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    return True


def test_dev_cluster_runs_a_replicated_cluster_and_stops_on_ctrl_c(tmp_path) -> None:
    """``ottla dev-cluster``: separate processes, topics replicated by default, every
    node's metrics on the address it prints, a clean stop of every node on SIGINT. The
    ports are checked free before the start, but another test may take one before a node
    binds it: then the cluster is started again on other ports (three tries)."""
    data = tmp_path / "cluster-0"
    for attempt in range(3):
        data = tmp_path / f"cluster-{attempt}"
        if _run_dev_cluster(data, last_try=attempt == 2):
            break
    for node in ("node-1", "node-101", "node-102"):
        assert "Shut down cleanly" in (data / f"{node}.log").read_text()


def test_an_unclean_election_brings_a_partition_back_and_the_isr_grows_again(
        cluster: KRaftCluster) -> None:
    """With unclean.leader.election.enable on the topic, a partition whose only in-sync
    replica died is led again by the first out-of-sync replica to return: it starts
    RECOVERING, reports itself recovered, and the others rejoin behind it. What only the
    dead leader had is lost, as unclean election means."""
    create(cluster, [NewTopic("unclean", 1, 3, config={
        "unclean.leader.election.enable": "true", "min.insync.replicas": "1"})])
    wait_until(lambda: full_isr(cluster, "unclean"), 30, 0.2, "three in-sync replicas")
    leader, replicas, _ = partitions(cluster, "unclean")[0]
    first, second = [r for r in replicas if r != leader]

    def produce(values: list[bytes]) -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for v in values:
            producer.produce("unclean", value=v, partition=0)
        assert producer.flush(30) == 0

    produce([b"everywhere-%d" % i for i in range(5)])
    cluster.nodes[first].kill9()
    cluster.nodes[second].kill9()
    wait_until(lambda: partitions(cluster, "unclean")[0][2] == [leader], 30, 0.2,
               "the ISR down to the leader")
    produce([b"leader-only-%d" % i for i in range(5)])
    cluster.nodes[leader].kill9()  # no broker is left: the partition has no leader
    cluster.nodes[first].start()
    wait_until(lambda: partitions(cluster, "unclean")[0][0] == first, 30, 0.2,
               "the returning replica elected uncleanly")
    produce([b"after-%d" % i for i in range(3)])
    cluster.nodes[leader].start()
    cluster.nodes[second].start()
    wait_until(lambda: full_isr(cluster, "unclean"), 60, 0.5,
               lambda: f"everyone back in sync: {partitions(cluster, 'unclean')}")
    got = consume_all(cluster, "unclean", 8)[0]
    assert got == [b"everywhere-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(3)]


def reassign(cluster: KRaftCluster, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ottla", "reassign-partitions",
                           "--bootstrap-server", cluster.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_reassign_partitions_moves_a_partition_with_its_records(cluster: KRaftCluster,
                                                                tmp_path) -> None:
    """kafka-reassign-partitions' flow: --generate a plan, --execute it, --verify until
    completed; the new replicas copy the records, the one leaving is dropped."""
    create(cluster, [NewTopic("moving", 1, 2)])
    wait_until(lambda: len(partitions(cluster, "moving")[0][2]) == 2, 30, 0.2, "ISR of 2")
    _, before, _ = partitions(cluster, "moving")[0]
    after = sorted(set(BROKERS) - {before[0]})  # the preferred replica leaves
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce("moving", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = reassign(cluster, "--generate", "--topics-to-move-json-file",
                         str(topics_file), "--broker-list", ",".join(map(str, after)))
    assert "Proposed partition reassignment configuration" in generated
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": after}]}))
    executed = reassign(cluster, "--execute", "--reassignment-json-file", str(plan))
    assert "Successfully started partition reassignments for moving-0" in executed
    assert f'"replicas":{json.dumps(before).replace(" ", "")}' in executed  # for rollback
    wait_until(lambda: "is completed" in reassign(
        cluster, "--verify", "--reassignment-json-file", str(plan)), 60, 0.5,
        lambda: f"the move to complete: {partitions(cluster, 'moving')}")
    leader, replicas, isr = partitions(cluster, "moving")[0]
    assert replicas == after and sorted(isr) == after and leader in after
    assert "No partition reassignments found." in reassign(cluster, "--list")
    assert consume_all(cluster, "moving", 50)[0] == [b"%d" % i for i in range(50)]
    gone = cluster.nodes[before[0]].data_dir
    wait_until(lambda: not any(name.startswith("moving-0") and not name.endswith("-delete")
                               for name in os.listdir(gone)),
               30, 0.2, "the leaving replica's log removed")


def replica_bytes(cluster: KRaftCluster, broker: int, topic: str) -> int:
    """Bytes of ``topic``-0's segments on ``broker``'s disk."""
    path = os.path.join(cluster.nodes[broker].data_dir, f"{topic}-0")
    if not os.path.isdir(path):
        return 0
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)
               if n.endswith(".log"))


def topic_config(cluster: KRaftCluster, topic: str, name: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource("topic", topic)
    entry = admin.describe_configs([resource])[resource].result(30)[name]
    return None if entry.is_default else entry.value


def test_a_brokers_configs_go_to_that_broker(cluster: KRaftCluster) -> None:
    """A BROKER config resource is answered by the broker it names, as Kafka's Admin
    sends it: another broker refuses it in Kafka 4.4's words (DescribeConfigs as
    ConfigHelper, IncrementalAlterConfigs as ConfigAdminManager, before forwarding);
    ``ottla configs`` given one broker's address alters and describes another's."""
    first, other = BROKERS[0], BROKERS[1]
    with WireClient(cluster.nodes[first].bootstrap) as client:
        described = client.request(ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": 4, "resource_name": name,
                           "configuration_keys": ["log.cleaner.threads"]}
                          for name in (str(other), "one")],
            "include_synonyms": False, "include_documentation": False})
        altered = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "validate_only": False, "resources": [
                {"resource_type": 4, "resource_name": name, "configs": [
                    {"name": "log.cleaner.threads", "config_operation": 0, "value": "2"}]}
                for name in (str(other), "one")]})
    assert [(r.error_code, r.error_message) for r in described.results] == [
        (ErrorCode.invalid_request,
         f"Unexpected broker id, expected {first} or empty string, but received {other}"),
        (ErrorCode.invalid_request, "Broker id must be an integer, but it is: one")]
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (ErrorCode.invalid_request,
         f"Unexpected broker id, expected {first}, but received {other}"),
        (ErrorCode.invalid_request, "Node id must be an integer, but it is: one")]

    def configs(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "ottla", "configs", "--bootstrap-server",
                               cluster.nodes[first].bootstrap, "--entity-type", "brokers",
                               "--entity-name", str(other), *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    try:
        assert configs("--alter", "--add-config", "log.cleaner.threads=2").strip() == \
            f"Completed updating config for broker {other}."
        assert "  log.cleaner.threads=2 sensitive=false" in configs("--describe")
    finally:
        configs("--alter", "--delete-config", "log.cleaner.threads")


def test_a_throttled_reassignment_copies_at_the_throttled_rate(cluster: KRaftCluster,
                                                               tmp_path) -> None:
    """kafka-reassign-partitions --throttle (KIP-73): the moving replicas are listed in the
    topic's *.replication.throttled.replicas and the brokers get the rate, so a new
    replica copies no faster than the throttle allows; lifting the throttle lets the move
    finish, and --verify then clears every throttle."""
    create(cluster, [NewTopic("throttled", 1, 1)])
    wait_until(lambda: partitions(cluster, "throttled").get(0, (-1,))[0] >= 0, 30, 0.2,
               "a leader")
    source = partitions(cluster, "throttled")[0][0]
    target = next(b for b in BROKERS if b != source)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "batch.size": 65536, "linger.ms": 5})
    for i in range(200):  # 2 MB in batches of at most 64 KiB
        producer.produce("throttled", value=b"%06d" % i + b"x" * 10_000, partition=0)
    assert producer.flush(30) == 0
    total = replica_bytes(cluster, source, "throttled")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "throttled", "partition": 0, "replicas": [source, target]}]}))
    executed = reassign(cluster, "--execute", "--reassignment-json-file", str(plan),
                        "--throttle", "50000")
    assert "The inter-broker throttle limit was set to 50000 B/s" in executed
    assert topic_config(cluster, "throttled", "leader.replication.throttled.replicas") \
        == f"0:{source}"
    assert topic_config(cluster, "throttled", "follower.replication.throttled.replicas") \
        == f"0:{target}"
    # At 50 kB/s over ten-second windows, the first fetch (at most replica.fetch.max.bytes,
    # 1 MiB) puts the rate over the bound for the next ten seconds.
    wait_until(lambda: replica_bytes(cluster, target, "throttled") > 0, 30, 0.1,
               "the new replica's first fetch")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        copied = replica_bytes(cluster, target, "throttled")
        assert copied <= 1_048_576 + 70_000, f"{copied} of {total} bytes copied"
        time.sleep(0.2)
    assert "is still in progress" in reassign(cluster, "--verify", "--reassignment-json-file",
                                              str(plan), "--preserve-throttles")
    reassign(cluster, "--execute", "--additional", "--reassignment-json-file", str(plan),
             "--throttle", str(10**10))
    verified = wait_until(lambda: (lambda out: out if "is completed" in out else None)(
        reassign(cluster, "--verify", "--reassignment-json-file", str(plan))), 60, 0.5,
        "the move to complete without the throttle")
    assert f"Clearing broker-level throttles on brokers {','.join(map(str, BROKERS))}" \
        in verified
    assert "Clearing topic-level throttles on topic throttled" in verified
    assert topic_config(cluster, "throttled", "leader.replication.throttled.replicas") is None
    assert replica_bytes(cluster, target, "throttled") == total


def test_a_consumer_reads_from_a_follower_in_its_rack(cluster: KRaftCluster) -> None:
    """KIP-392: with replica.selector.class=RackAwareReplicaSelector, a consumer whose
    client.rack is a follower's rack is sent there by the leader and reads everything
    from it."""
    create(cluster, [NewTopic("nearby", 1, 3)])
    wait_until(lambda: full_isr(cluster, "nearby"), 30, 0.2, "three in-sync replicas")
    leader, replicas, _ = partitions(cluster, "nearby")[0]
    follower = next(r for r in replicas if r != leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("nearby", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    fetched_from: list[int] = []

    def stats(text: str) -> None:
        partition = json.loads(text)["topics"].get("nearby", {}).get("partitions", {}) \
            .get("0", {})
        if partition.get("broker", -1) >= 0:
            fetched_from.append(partition["broker"])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "nearby",
                         "client.rack": f"rack-{follower}", "statistics.interval.ms": 200,
                         "stats_cb": stats, "enable.auto.commit": False})
    consumer.assign([TopicPartition("nearby", 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while (len(got) < 100 or follower not in fetched_from) and time.monotonic() < deadline:
        got += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
    consumer.close()
    assert got == [b"%d" % i for i in range(100)]
    assert follower in fetched_from and fetched_from[-1] == follower


def describe_partition(cluster: KRaftCluster, topic: str) -> Any:
    """DescribeTopicPartitions of partition 0 through a live broker (with its ELR)."""
    for broker in cluster.broker_ids:
        node = cluster.nodes[broker]
        if node.proc is None:
            continue
        with WireClient(node.bootstrap, timeout=5) as client:
            response = client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": topic}], "response_partition_limit": 10,
                "cursor": None})
        (t,) = response.topics
        if t.partitions:
            return t.partitions[0]
    return None


def test_with_eligible_leader_replicas_a_replica_that_left_the_isr_leads_cleanly(
        tmp_path) -> None:
    """KIP-966 (eligible.leader.replicas.version=1): followers leaving an ISR already
    below min.insync.replicas stay eligible, the high watermark stops there (an acks=1
    write to the lone leader stays unread), and when everyone is gone an eligible replica
    that shut down cleanly leads without an unclean election, while one killed -9 comes
    back ineligible (it may have lost what it acknowledged); the old leader cuts its
    unread tail."""
    cluster = KRaftCluster(str(tmp_path), controllers=1, brokers=3,
                           controller_props={"broker.session.timeout.ms": "3000"},
                           broker_props={"broker.heartbeat.interval.ms": "500",
                                         "replica.fetch.backoff.ms": "200"}).start()
    try:
        upgraded = subprocess.run(
            [sys.executable, "-m", "ottla", "features", "--bootstrap-server",
             cluster.bootstrap, "upgrade", "--feature", "eligible.leader.replicas.version=1"],
            capture_output=True, text=True, timeout=60)
        assert upgraded.returncode == 0, upgraded.stderr
        create(cluster, [NewTopic("eligible", 1, 3, config={"min.insync.replicas": "2"})])
        wait_until(lambda: full_isr(cluster, "eligible"), 30, 0.2, "three in-sync replicas")
        leader, replicas, _ = partitions(cluster, "eligible")[0]
        first, second = [r for r in replicas if r != leader]
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce("eligible", value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0
        cluster.nodes[second].kill9()
        wait_until(lambda: len(partitions(cluster, "eligible")[0][2]) == 2, 30, 0.2, "ISR 2")
        assert cluster.nodes[first].stop() == 0  # clean: its marker names its epoch
        described = wait_until(lambda: (lambda p: p if list(p.isr_nodes) == [leader] else None)(
            describe_partition(cluster, "eligible")), 30, 0.2, "ISR down to the leader")
        assert list(described.eligible_leader_replicas) == [first]
        lone = Producer({"bootstrap.servers": cluster.nodes[leader].bootstrap, "acks": "1"})
        lone.produce("eligible", value=b"unreplicated", partition=0)
        assert lone.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": cluster.nodes[leader].bootstrap,
                             "group.id": "elr-check"})
        assert consumer.get_watermark_offsets(TopicPartition("eligible", 0), timeout=10)[1] \
            == 10  # the high watermark stopped below min.insync.replicas
        consumer.close()
        cluster.nodes[leader].kill9()
        cluster.nodes[second].start()  # out of the ISR before min.insync.replicas broke
        gone = wait_until(lambda: (lambda p: p if list(p.isr_nodes) == [] else None)(
            describe_partition(cluster, "eligible")), 30, 0.2, "the ISR empty")
        assert sorted(gone.eligible_leader_replicas) == sorted([first, leader])
        cluster.nodes[leader].start()  # crashed: no clean-shutdown marker
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        wait_until(lambda: leader in admin.list_topics(timeout=10).brokers, 30, 0.2,
                   "the crashed leader registered and unfenced")
        back = describe_partition(cluster, "eligible")
        assert (back.leader_id, list(back.eligible_leader_replicas)) == (-1, [first])
        assert leader in back.last_known_elr
        cluster.nodes[first].start()
        wait_until(lambda: partitions(cluster, "eligible")[0][0] == first, 30, 0.2,
                   "the eligible replica leading")
        assert describe_partition(cluster, "eligible").leader_id == first
        wait_until(lambda: full_isr(cluster, "eligible"), 60, 0.5, "everyone back in sync")
        assert list(describe_partition(cluster, "eligible").eligible_leader_replicas) == []
        assert consume_all(cluster, "eligible", 10)[0] == [b"%d" % i for i in range(10)]
    finally:
        cluster.stop()


def test_a_follower_answers_describe_producers_as_its_leader_does(
        cluster: KRaftCluster) -> None:
    """As Kafka 4 (``ReplicaManager.activeProducerState`` needs no leadership): a follower
    answers DescribeProducers from the producer state of the batches it replicated."""
    create(cluster, [NewTopic("described", 1, 3)])
    wait_until(lambda: full_isr(cluster, "described"), 30, 0.2, "three in-sync replicas")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for i in range(50):
        producer.produce("described", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    leader, replicas, _ = partitions(cluster, "described")[0]

    def producers(broker: int) -> list[tuple[int, int, int]]:
        """(producer id, epoch, last sequence) of partition 0's producers on ``broker``."""
        with WireClient(cluster.nodes[broker].bootstrap, timeout=5) as client:
            response = client.request(ApiKey.DESCRIBE_PRODUCERS, 0, {
                "topics": [{"name": "described", "partition_indexes": [0]}]})
        (state,) = response.topics[0].partitions
        assert state.error_code == ErrorCode.none, (broker, ErrorCode(state.error_code))
        return sorted((p.producer_id, p.producer_epoch, p.last_sequence)
                      for p in state.active_producers)

    on_leader = producers(leader)
    assert [last_sequence for _, _, last_sequence in on_leader] == [49]
    for follower in (r for r in replicas if r != leader):
        wait_until(lambda follower=follower: producers(follower) == on_leader, 30, 0.2,
                   f"broker {follower}, a follower, to list {on_leader}")


# --- Kafka's own tools against the cluster ------------------------------------------------

def verifiable(tool: str, *args: str) -> VerifiableClient:
    """One of Kafka's verifiable clients running against the cluster."""
    from tests.kafka_tools import require_kafka

    return VerifiableClient(require_kafka(), tool, *args)


def test_kafkas_verifiable_producer_and_consumer_lose_nothing_when_a_leader_is_killed(
        cluster: KRaftCluster) -> None:
    """What Kafka's own system tests do (ReplicationTest): kafka-verifiable-producer
    (acks=-1, Kafka's Java producer, idempotent by default) writes while the leader of a
    partition is killed with SIGKILL; kafka-verifiable-consumer then reads, in a group,
    every value the producer saw acknowledged."""
    topic, total = "verifiable", 3000
    create(cluster, [NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])
    wait_until(lambda: full_isr(cluster, topic), 30, 0.2, "three in-sync replicas")
    producer = verifiable(
        "kafka-verifiable-producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--max-messages", str(total), "--throughput", "500", "--acks", "-1")
    victim = partitions(cluster, topic)[0][0]
    try:
        wait_until(lambda: len(producer.named("producer_send_success")) > total // 4, 60,
                   0.1, "a quarter of the records acknowledged before the kill")
        cluster.nodes[victim].kill9()
        assert producer.finish(120) == 0
    finally:
        if producer.proc.poll() is None:
            producer.proc.kill()
        if cluster.nodes[victim].proc is None:
            cluster.nodes[victim].start()
    acked = {str(e["value"]) for e in producer.named("producer_send_success")}
    (summary,) = producer.named("tool_data")
    assert summary["acked"] == len(acked) and summary["sent"] == total
    assert acked, producer.named("producer_send_error")[:3]
    # As Kafka's ReplicationTest: records the producer gave up on (a NetworkException
    # as the leader died) may be lost; every acknowledged one must be read, once.
    consumer = verifiable(
        "kafka-verifiable-consumer", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
        "--group-id", "verifiers", "--verbose", "--reset-policy", "earliest")

    def values() -> list[str]:
        return [str(e["value"]) for e in consumer.named("record_data")]
    try:
        wait_until(lambda: acked <= set(values()), 120, 0.2,
                   lambda: f"the acknowledged records read ({len(acked - set(values()))} "
                           f"missing)")
        wait_until(lambda: consumer.named("offsets_committed"), 30, 0.2, "a commit")
    finally:
        consumer.proc.kill()
        consumer.finish(30)
    read = values()
    assert len(read) == len(set(read)), "duplicated records"
    committed = consumer.named("offsets_committed")
    assert committed and all(c["success"] for c in committed)
    wait_until(lambda: full_isr(cluster, topic), 60, 0.5, "the killed broker back in sync")


def test_kafkas_reassign_and_leader_election_tools_move_and_elect(cluster: KRaftCluster,
                                                                 tmp_path) -> None:
    """kafka-reassign-partitions (--execute, --verify) moves a replica set and reorders its
    leader; kafka-leader-election --election-type preferred then makes the first replica
    lead, as Kafka's tools print it."""
    from tests.kafka_ref.cluster import run_tool

    topic = "moved-by-kafka"
    create(cluster, [NewTopic(topic, 1, 2)])
    wait_until(lambda: len(partitions(cluster, topic).get(0, (-1, [], []))[2]) == 2, 30, 0.2,
               "the topic's two replicas in sync")
    _, replicas, _ = partitions(cluster, topic)[0]
    target = [b for b in BROKERS if b not in replicas] + [replicas[0]]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    executed = run_tool("kafka-reassign-partitions", "--bootstrap-server", cluster.bootstrap,
                        "--reassignment-json-file", str(plan), "--execute", check=True)
    assert "Successfully started partition reassignment" in executed.stdout, executed.stdout
    assert f"{topic}-0" in executed.stdout

    def completed() -> bool:
        verified = run_tool("kafka-reassign-partitions", "--bootstrap-server",
                            cluster.bootstrap, "--reassignment-json-file", str(plan),
                            "--verify", check=True)
        return f"Reassignment of partition {topic}-0 is completed." in verified.stdout
    wait_until(completed, 60, 0.5, "the reassignment completed")
    wait_until(lambda: partitions(cluster, topic)[0][1] == target, 30, 0.2,
               "the new replica set in the metadata")
    elected = run_tool("kafka-leader-election", "--bootstrap-server", cluster.bootstrap,
                       "--election-type", "preferred", "--topic", topic, "--partition", "0",
                       check=True)
    wait_until(lambda: partitions(cluster, topic)[0][0] == target[0], 30, 0.2,
               "the preferred replica leading")
    assert (f"Successfully completed leader election (PREFERRED) for partitions {topic}-0"
            in elected.stdout or
            f"Valid replica already elected for partitions {topic}-0" in elected.stdout), \
        elected.stdout
