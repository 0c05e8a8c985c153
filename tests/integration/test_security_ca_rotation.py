"""A cluster whose controller and inter-broker listeners are mutual TLS moves to a new CA
while it runs, as Kafka 4.4's dynamic listener configs allow: per node,
``listener.name.<listener>.ssl.truststore.location`` to a bundle of both CAs, then
``...ssl.keystore.location`` to a certificate of the new CA (same names), then the
truststore to the new CA alone. A controller's configs are set through the active
controller (``kafka-configs --bootstrap-controller``), a broker's through itself. Each
update reaches the node's listeners and its own connections (replica fetchers, the
controller channel, the quorum's), so once the old CA is trusted nowhere the quorum still
elects, the brokers still follow it, and replicas still fetch from each other over new
connections."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from cryptography import x509

from ottla.chaos.processes import configure, format_storage
from ottla.client.security import ClientSecurity
from ottla.common.uuids import random_uuid
from ottla.metadata.image import ConfigResourceType
from ottla.protocol.api import ApiKey
from ottla.protocol.errors import ErrorCode
from tests.helpers import OttlaProcess, WireClient, free_port, wait_until
from tests.tls import CertificateAuthority

OP_SET = 0


@dataclass
class Rotation:
    """Three controllers (1-3) and two brokers (101, 102): CONTROLLER and BROKER are SSL
    with ``ssl.client.auth=required``; CLIENT (brokers only) is the test's PLAINTEXT way
    in."""

    root: Path
    nodes: dict[int, OttlaProcess]
    broker_ports: dict[int, int]
    props: dict[int, dict[str, str]]
    old: CertificateAuthority
    new: CertificateAuthority

    def keystore(self, ca: CertificateAuthority, node_id: int) -> Path:
        return self.root / f"{ca.directory.name}-{node_id}.pem"

    def trust(self, name: str) -> Path:
        return self.root / f"trust-{name}.pem"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.nodes[b].bootstrap for b in (101, 102)
                        if self.nodes[b].proc is not None)

    def ssl_listeners(self, node_id: int) -> dict[str, str]:
        """The node's SSL listeners by name, as host:port."""
        node = self.nodes[node_id]
        if node.is_broker:
            return {"broker": f"127.0.0.1:{self.broker_ports[node_id]}"}
        return {"controller": node.controller}

    def client(self, address: str, ca: CertificateAuthority, trust: str) -> WireClient:
        """A TLS connection presenting a certificate of ``ca`` and trusting ``trust``."""
        context = ssl.create_default_context(cafile=str(self.trust(trust)))
        issued = ca.client(f"tool-{ca.directory.name}", O="Ottla tests", CN="tool")
        context.load_cert_chain(issued.cert_path, issued.key_path)
        return WireClient(address, timeout=5, security=ClientSecurity(context))

    def alter(self, node_id: int, configs: dict[str, str], ca: CertificateAuthority,
              trust: str) -> None:
        """IncrementalAlterConfigs SET of one node's configs: a broker's through itself
        (as kafka-configs --bootstrap-server does), a controller's through the active
        controller (--bootstrap-controller; the others answer NOT_CONTROLLER)."""
        if self.nodes[node_id].is_broker:
            admin = AdminClient({"bootstrap.servers": self.nodes[node_id].bootstrap})
            resource = ConfigResource(ResourceType.BROKER, str(node_id), incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in configs.items()])
            admin.incremental_alter_configs([resource])[resource].result(30)
            return
        body = {"validate_only": False, "resources": [{
            "resource_type": ConfigResourceType.BROKER, "resource_name": str(node_id),
            "configs": [{"name": k, "config_operation": OP_SET, "value": v}
                        for k, v in configs.items()]}]}

        def through_the_active_controller() -> bool:
            for controller in (1, 2, 3):
                if self.nodes[controller].proc is None:
                    continue
                try:
                    with self.client(self.nodes[controller].controller, ca, trust) as c:
                        answer = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
                except OSError:
                    continue
                code = answer.responses[0].error_code
                if code == ErrorCode.none:
                    return True
                assert code == ErrorCode.not_controller, answer.responses[0]
            return False
        wait_until(through_the_active_controller, 60, 0.5,
                   f"node {node_id}'s configs set through the active controller")

    def each_listener(self, check, what: str) -> None:
        """Wait until ``check(address)`` holds at every SSL listener of every live node."""
        for node_id, node in self.nodes.items():
            if node.proc is None:
                continue
            for address in self.ssl_listeners(node_id).values():
                wait_until(lambda a=address: check(a), 60, 0.5, f"{what} at {address}")


def accepts(rotation: Rotation, address: str, ca: CertificateAuthority, trust: str,
            issuer: CertificateAuthority | None = None) -> bool:
    """A client of ``ca`` completes a handshake and a request (the listener trusts it),
    and, given ``issuer``, is served a certificate of that CA."""
    try:
        with rotation.client(address, ca, trust) as client:
            client.api_versions()
            der = client.sock.getpeercert(binary_form=True)  # type: ignore[attr-defined]
    except (OSError, EOFError):
        return False
    served = x509.load_der_x509_certificate(der)
    return issuer is None or served.issuer == issuer.cert.subject


def refuses(rotation: Rotation, address: str, ca: CertificateAuthority, trust: str) -> bool:
    return not accepts(rotation, address, ca, trust)


@pytest.fixture
def rotation(tmp_path) -> Iterator[Rotation]:
    old = CertificateAuthority(tmp_path / "old", "Old CA")
    new = CertificateAuthority(tmp_path / "new", "New CA")
    nodes = {i: OttlaProcess(str(tmp_path / f"controller-{i}"), roles="controller",
                             node_id=i) for i in (1, 2, 3)}
    nodes.update({i: OttlaProcess(str(tmp_path / f"broker-{i}"), roles="broker", node_id=i)
                  for i in (101, 102)})
    r = Rotation(tmp_path, nodes, {101: free_port(), 102: free_port()}, {}, old, new)
    for ca in (old, new):
        for node_id in nodes:
            r.keystore(ca, node_id).write_bytes(ca.server(f"node-{node_id}").pem())
    r.trust("old").write_bytes(old.cert_path.read_bytes())
    r.trust("new").write_bytes(new.cert_path.read_bytes())
    r.trust("both").write_bytes(old.cert_path.read_bytes() + new.cert_path.read_bytes())
    voters = ",".join(f"{i}@127.0.0.1:{nodes[i].controller_port}" for i in (1, 2, 3))
    cluster_id = random_uuid()
    for node_id, node in nodes.items():
        props = {
            "process.roles": node.roles, "node.id": str(node_id),
            "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:SSL,BROKER:SSL,CLIENT:PLAINTEXT",
            "log.dirs": node.data_dir, "ssl.client.auth": "required",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(r.keystore(old, node_id)),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(r.trust("old")),
            "broker.session.timeout.ms": "6000",
        }
        if node.is_broker:
            port = r.broker_ports[node_id]
            props.update({
                "listeners": f"CLIENT://127.0.0.1:{node.port},BROKER://127.0.0.1:{port}",
                "advertised.listeners":
                    f"CLIENT://127.0.0.1:{node.port},BROKER://127.0.0.1:{port}",
                "inter.broker.listener.name": "BROKER", "broker.heartbeat.interval.ms": "500",
                "offsets.topic.replication.factor": "2",
                # A follower that cannot fetch stays in the ISR longer than a produce
                # with acks=all waits: such a produce fails rather than shrinking the ISR.
                "replica.lag.time.max.ms": "120000"})
        else:
            props["listeners"] = f"CONTROLLER://127.0.0.1:{node.controller_port}"
        r.props[node_id] = props
        configure(node, str(tmp_path / f"node-{node_id}.properties"), props)
    format_storage(nodes.values(), cluster_id)
    try:
        for node in nodes.values():
            node.start(wait=False)
        for node_id in (101, 102):
            nodes[node_id].wait_ready(90)
        yield r
    finally:
        for node_id in (101, 102, 1, 2, 3):
            nodes[node_id].stop(check=False)


def produce(bootstrap: str, topic: str, partitions: list[int], count: int) -> None:
    """``count`` records to each partition with acks=all; every one confirmed."""
    failed: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 45000})
    for partition in partitions:
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=partition,
                             on_delivery=lambda err, _m: err and failed.append(err))
    assert producer.flush(60) == 0
    assert failed == []


def replicas(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    """Each partition's (leader, ISR)."""
    described = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: (d.leader, sorted(d.isrs)) for p, d in described.items()}


def test_the_cluster_moves_to_a_new_ca_and_keeps_electing_and_replicating(rotation) -> None:
    r = rotation
    old, new = r.old, r.new
    admin = AdminClient({"bootstrap.servers": r.bootstrap})
    admin.create_topics([NewTopic("rotated", 4, 2)])["rotated"].result(60)
    wait_until(lambda: all(len(isr) == 2 for _, isr in replicas(admin, "rotated").values()),
               60, 0.5, "two in-sync replicas of each partition")
    produce(r.bootstrap, "rotated", [0, 1, 2, 3], 10)
    r.each_listener(lambda a: refuses(r, a, new, "old"), "a client of the new CA refused")

    def keys(node_id: int, key: str, value: Path) -> dict[str, str]:
        """``key`` for each listener the node serves or connects to."""
        listeners = ["broker", "controller"] if r.nodes[node_id].is_broker else ["controller"]
        return {f"listener.name.{listener}.ssl.{key}": str(value) for listener in listeners}

    # 1. Trust both CAs everywhere.
    for node_id in r.nodes:
        r.alter(node_id, keys(node_id, "truststore.location", r.trust("both")), old, "old")
    r.each_listener(lambda a: accepts(r, a, new, "old"), "a client of the new CA accepted")
    produce(r.bootstrap, "rotated", [0, 1, 2, 3], 10)

    # 2. Certificates of the new CA everywhere (the same names, as Kafka requires).
    for node_id in r.nodes:
        r.alter(node_id, keys(node_id, "keystore.location", r.keystore(new, node_id)),
                old, "both")
    r.each_listener(lambda a: accepts(r, a, new, "new", issuer=new),
                    "a certificate of the new CA served")
    produce(r.bootstrap, "rotated", [0, 1, 2, 3], 10)

    # 3. The old CA trusted nowhere.
    for node_id in r.nodes:
        r.alter(node_id, keys(node_id, "truststore.location", r.trust("new")), new, "new")
    r.each_listener(lambda a: refuses(r, a, old, "new"), "a client of the old CA refused")
    r.each_listener(lambda a: accepts(r, a, new, "new", issuer=new),
                    "a client of the new CA accepted")

    # The active controller lost: the other two elect over their own new connections
    # and the brokers follow the new one.
    def active() -> int:
        for controller in (1, 2, 3):
            with r.client(r.nodes[controller].controller, new, "new") as client:
                quorum = client.request(ApiKey.DESCRIBE_QUORUM, 1, {"topics": [{
                    "topic_name": "__cluster_metadata", "partitions": [
                        {"partition_index": 0}]}]})
            leader = quorum.topics[0].partitions[0].leader_id
            if leader > 0:
                return int(leader)
        return 0
    first = wait_until(active, 30, 0.5, "a quorum leader")
    r.nodes[first].kill9()
    admin.create_topics([NewTopic("after-election", 2, 2)])["after-election"].result(90)
    produce(r.bootstrap, "after-election", [0, 1], 10)

    # A broker restarted on the new material (server.properties as renewed): the other
    # broker and the controllers, still on what they were given dynamically, take it
    # back, and it leads and is fetched from again.
    r.nodes[102].stop()
    r.props[102].update({"ssl.keystore.location": str(r.keystore(new, 102)),
                         "ssl.truststore.location": str(r.trust("new"))})
    configure(r.nodes[102], str(r.nodes[102].config_file), r.props[102])
    r.nodes[102].start(wait=False)
    r.nodes[102].wait_ready(90)
    wait_until(lambda: all(len(isr) == 2 for _, isr in replicas(admin, "rotated").values()),
               90, 0.5, "broker 102 back in every ISR")
    wanted = [TopicPartition("rotated", p) for p in range(4)]
    admin.elect_leaders(ElectionType.PREFERRED, wanted).result(30)
    # The election is committed when answered; the brokers' metadata follows it.
    on_102 = wait_until(lambda: [p for p, (leader, _) in replicas(admin, "rotated").items()
                                 if leader == 102], 30, 0.2,
                        lambda: f"broker 102 leading again: {replicas(admin, 'rotated')}")
    produce(r.bootstrap, "rotated", on_102, 10)  # acks=all: broker 101 fetched them
    assert all(isr == [101, 102] for _, isr in replicas(admin, "rotated").values())
