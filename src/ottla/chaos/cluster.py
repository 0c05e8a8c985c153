"""A cluster of combined (controller + broker) ``ottla`` processes whose inter-node
traffic passes through the fault proxy, while clients connect to each node directly.

Every directed link gets a proxy, and each node is told to use them: its
``controller.quorum.voters`` name the other voters at the proxies of its links to them
(KRaft and the broker-to-controller channel), and for replication and the other
inter-broker requests node ``n`` speaks on a listener of its own, ``REPL<n>``, which every
node has and advertises at the proxy of the link from ``n`` to it. So what node 1 fetches
from node 2 goes through the proxy of ``1 -> 2`` and nowhere else.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator

from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka.admin import AdminClient, NewTopic

from ottla.chaos.clocks import Clocks
from ottla.chaos.disks import Disks
from ottla.chaos.processes import (
    OttlaProcess,
    WireClient,
    configure,
    describe_quorum,
    format_storage,
    stable_port,
)
from ottla.chaos.proxy import ProxyNetwork
from ottla.common.uuids import random_uuid
from ottla.protocol.api import ApiKey

NODE_PROPS = {
    # A killed or paused node is fenced and replaced as leader within seconds.
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    "replica.fetch.backoff.ms": "200",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "auto.create.topics.enable": "false",
    # Members of a group that lost their coordinator are replaced within a run.
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}
CLOCK_TOPIC = "chaos-clock"
"""clock-skew: one partition per node, led by it alone (partition n-1 on node n), whose
records the leader stamps with its wall clock (LogAppendTime): what a probe reads the
node's clock from."""


class ChaosCluster:
    """Nodes 1..n, each ``broker,controller``, their links through ``network``."""

    def __init__(self, base: str, network: ProxyNetwork, nodes: int = 3,
                 props: dict[str, str] | None = None, disks: bool = False,
                 clocks: bool = False) -> None:
        """With ``disks`` each node's data dir is a disk of its own that can be filled;
        with ``clocks`` each node runs under a wall clock that can be skewed."""
        self.base = base
        self.network = network
        self.cluster_id = random_uuid()
        self.paused: set[int] = set()
        ids = list(range(1, nodes + 1))
        rng, taken = random.Random(), set[int]()
        self.nodes = {i: OttlaProcess(os.path.join(base, f"node-{i}"), node_id=i,
                                      port=stable_port(rng, taken),
                                      controller_port=stable_port(rng, taken))
                      for i in ids}
        # repl[b][a]: node b's listener for what node a asks it
        repl = {b: {a: stable_port(rng, taken) for a in ids} for b in ids}
        raft_via = {(a, b): network.add(a, b, "CONTROLLER",
                                        ("127.0.0.1", self.nodes[b].controller_port),
                                        stable_port(rng, taken))
                    for a in ids for b in ids if a != b}
        repl_via = {(a, b): network.add(a, b, "REPL", ("127.0.0.1", repl[b][a]),
                                        stable_port(rng, taken))
                    for a in ids for b in ids if a != b}
        os.makedirs(base, exist_ok=True)
        self.clocks = Clocks(base, ids) if clocks else None
        for i, node in self.nodes.items():
            node.env = self.clocks.env(i) if self.clocks is not None else {}
        self.disks = Disks({i: node.data_dir for i, node in self.nodes.items()})
        if disks:
            self.disks.mount()
        for b, node in self.nodes.items():
            names = [f"REPL{a}" for a in ids]
            voters = ",".join(
                f"{a}@127.0.0.1:{node.controller_port if a == b else raft_via[b, a]}"
                for a in ids)
            listeners = [f"PLAINTEXT://127.0.0.1:{node.port}",
                         f"CONTROLLER://127.0.0.1:{node.controller_port}",
                         *(f"REPL{a}://127.0.0.1:{repl[b][a]}" for a in ids)]
            advertised = [f"PLAINTEXT://127.0.0.1:{node.port}",
                          *(f"REPL{a}://127.0.0.1:"
                            f"{repl[b][a] if a == b else repl_via[a, b]}" for a in ids)]
            configure(node, os.path.join(base, f"node-{b}.properties"), {
                "process.roles": "broker,controller", "node.id": str(b),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "listeners": ",".join(listeners),
                "advertised.listeners": ",".join(advertised),
                "inter.broker.listener.name": f"REPL{b}",
                "listener.security.protocol.map": ",".join(
                    f"{name}:PLAINTEXT" for name in ["PLAINTEXT", "CONTROLLER", *names]),
                "log.dirs": node.data_dir,
                **NODE_PROPS, **(props or {}),
            })
        try:
            format_storage(self.nodes.values(), self.cluster_id)
        except BaseException:
            self.disks.release()
            raise

    @property
    def ids(self) -> list[int]:
        return sorted(self.nodes)

    @property
    def bootstrap(self) -> str:
        """Every node's client listener: clients reach the nodes without a proxy."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    def start(self, timeout: float = 60) -> ChaosCluster:
        try:
            for node in self.nodes.values():
                node.start(wait=False)
            for node in self.nodes.values():
                node.wait_ready(timeout)
            if self.clocks is not None:
                self._create_clock_topic()
        except BaseException:
            self.stop()
            raise
        return self

    def running(self) -> Iterator[OttlaProcess]:
        """The nodes up and not paused (a paused one would hold a request to its end)."""
        return (node for i, node in self.nodes.items()
                if node.proc is not None and node.proc.poll() is None
                and i not in self.paused)

    def kill9(self, node_id: int) -> None:
        if self.nodes[node_id].proc is not None:
            self.nodes[node_id].kill9()
        self.paused.discard(node_id)

    def restart(self, node_id: int, wait: bool = True, timeout: float = 60) -> None:
        """Start a killed node, or one that stopped on its own, again on its data (and
        wait until it serves)."""
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is not None:
            node.proc = None  # stopped on its own (a failed disk): its code is in its log
        if node.proc is None:
            node.start(wait=False)
            if wait:
                node.wait_ready(timeout)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process holds its connections and answers nothing."""
        proc = self.nodes[node_id].proc
        if proc is not None:
            proc.send_signal(signal.SIGSTOP)
            self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        if proc is not None:
            proc.send_signal(signal.SIGCONT)
        self.paused.discard(node_id)

    def stop(self) -> dict[int, int | None]:
        """Stop every node (SIGTERM, resumed first in case it is paused): exit codes."""
        codes: dict[int, int | None] = {}
        for i, node in self.nodes.items():
            self.resume(i)
            codes[i] = node.stop(check=False)
        return codes

    def quorum_leader(self) -> int:
        """The active controller (-1 while there is none)."""
        return int(describe_quorum(self.running()).leader_id)

    def partition_leaders(self, topic: str) -> dict[int, int]:
        """partition -> leader (-1 for none) as the first live node answering knows it."""
        for node in self.running():
            try:
                with WireClient(node.bootstrap, timeout=5) as client:
                    response = client.request(ApiKey.METADATA, 12, {
                        "topics": [{"name": topic, "topic_id": None}],
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False})
            except OSError:
                continue
            (t,) = response.topics
            if t.error_code == 0 and t.partitions:
                return {p.partition_index: p.leader_id for p in t.partitions}
        return {}

    def fill_disk(self, node_id: int) -> int:
        """disk-full: the node's disk filled; the bytes it took."""
        return self.disks.fill(node_id)

    def free_disk(self, node_id: int) -> None:
        self.disks.free(node_id)

    def release_disks(self) -> None:
        """The nodes' disks unmounted, their files kept in the data dirs (when stopped)."""
        self.disks.release()

    def skew_clock(self, node_id: int, offset_s: float) -> None:
        """clock-skew: the node's wall clock ``offset_s`` off from now on (0: back)."""
        assert self.clocks is not None, "the cluster was made without clocks"
        self.clocks.set(node_id, offset_s)

    def _create_clock_topic(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        topic = NewTopic(CLOCK_TOPIC, len(self.ids), replica_assignment=[[i] for i in self.ids],
                         config={"message.timestamp.type": "LogAppendTime",
                                 "min.insync.replicas": "1"})
        admin.create_topics([topic], operation_timeout=30)[CLOCK_TOPIC].result(60)

    def clock_offset(self, node_id: int, timeout: float = 10.0) -> float:
        """How far ahead of the harness's wall clock the node's is, in seconds, from the
        LogAppendTime it stamps on a record it leads (raises when it does not answer)."""
        producer = Producer({"bootstrap.servers": self.nodes[node_id].bootstrap,
                             "acks": "1", "message.timeout.ms": int(timeout * 1000),
                             "enable.idempotence": False,
                             "log_level": 0})  # a node down is the probe's error, not noise
        stamped: list[tuple[int, int]] = []
        failed: list[object] = []

        def delivered(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failed.append(error)
            else:
                stamped.append(message.timestamp())

        before = time.time()
        producer.produce(CLOCK_TOPIC, b"probe", partition=self.ids.index(node_id),
                         on_delivery=delivered)
        producer.flush(timeout + 5)
        after = time.time()
        if failed or not stamped:
            raise KafkaException(failed[0] if failed else "no delivery report")
        kind, at_ms = stamped[0]
        if kind != TIMESTAMP_LOG_APPEND_TIME:
            raise RuntimeError(f"{CLOCK_TOPIC} gave timestamp type {kind}, not LogAppendTime")
        return round(at_ms / 1000 - (before + after) / 2, 2)
