"""ACLs enforced, against Apache Kafka 4.4 as the oracle: one Kafka node and one Ottla
node configured alike (``StandardAuthorizer``; ``super.users=User:ANONYMOUS``, so their
PLAINTEXT listener is the administrator's; a SASL_PLAINTEXT listener where the PLAIN users
alice and bob log in). Every step runs the same real clients (confluent-kafka, and
Kafka's own ``kafka-acls``) against both, as the same user, and asserts what the user
sees on Kafka, then that Ottla shows exactly the same: produced or refused with which
error, which records a consumer reads, which topics a listing shows.
"""

from __future__ import annotations

import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import OttlaProcess, free_port, wait_until
from tests.kafka_ref.cluster import KafkaCluster, run_tool, single_node
from tests.kafka_tools import Side, require_kafka, rows, run_all

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T = TypeVar("T")
METRICS_WINDOW_MS = 10**12
PLUGIN = "type=plugins,config=authorizer.class.name,class=StandardAuthorizer"
Counts = dict[tuple[str, str], int]
"""(role, attribute) -> the decisions an authorizer rate counted since the node started."""


def secured(plaintext: int, controller: int, sasl: int) -> dict[str, str]:
    """The same security settings for both nodes, around their own ports."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret" user_admin="admin-secret" '
            + " ".join(f'user_{user}="{password}"' for user, password in USERS.items())
            + ";")
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plaintext},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "num.partitions": "1",
        # The authorizer's rates then divide by this window (plus the little time since
        # their first sample): count = rate per minute * window / 60000, to 1e-6.
        "metrics.sample.window.ms": str(METRICS_WINDOW_MS),
    }


@dataclass
class System:
    """One of the two nodes as the tests use it."""

    name: str
    plaintext: str
    sasl: str
    controller: str
    log_path: str
    """The node's log, where its ``kafka.authorizer.logger`` lines go at INFO."""
    authorizer_counts: Callable[[], Counts]
    """The authorizer metrics: Kafka's over JMX, Ottla's from /metrics."""

    def admin(self) -> AdminClient:
        """The administrator: the PLAINTEXT listener's ANONYMOUS, a super user."""
        return AdminClient({"bootstrap.servers": self.plaintext})

    def user(self, name: str, **settings: Any) -> dict[str, Any]:
        """A confluent-kafka config logging in as ``name`` on the SASL listener."""
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": name,
                "sasl.password": USERS[name], **settings}


@dataclass
class Pair:
    kafka: System
    ottla: System

    def both(self, step: Callable[[System], T]) -> tuple[T, T]:
        """``step`` on Kafka and on Ottla at once: (Kafka's outcome, Ottla's)."""
        with ThreadPoolExecutor(2) as pool:
            on_kafka, on_ottla = pool.submit(step, self.kafka), pool.submit(step, self.ottla)
            return on_kafka.result(), on_ottla.result()


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Iterator[Pair]:
    require_kafka()
    root: Path = tmp_path_factory.mktemp("acls")
    kafka = single_node(root / "kafka")
    node = kafka.nodes[1]
    kafka_sasl, jmx = free_port(), free_port()
    node.props.update(secured(node.port, node.controller_port, kafka_sasl))
    node.jvm_opts = (*node.jvm_opts, *jmx_options(jmx))
    ottla = OttlaProcess(str(root / "ottla" / "data"))
    ottla_sasl, prometheus = free_port(), free_port()
    ottla.overrides = {**secured(ottla.port, ottla.controller_port, ottla_sasl),
                       "prometheus.listener": f"127.0.0.1:{prometheus}"}
    failure: list[BaseException] = []

    def start_kafka(cluster: KafkaCluster) -> None:
        try:
            cluster.start()
        except BaseException as e:  # raised below, once Ottla is up or has failed
            failure.append(e)
    (root / "ottla").mkdir()
    starter = threading.Thread(target=start_kafka, args=(kafka,))
    starter.start()
    try:
        ottla.start()
    except BaseException:
        starter.join()
        kafka.stop(check=False)
        raise
    starter.join()
    if failure:
        ottla.stop(check=False)
        raise failure[0]
    try:
        yield Pair(System("kafka", node.bootstrap, f"127.0.0.1:{kafka_sasl}", node.controller,
                          str(node.log_path), lambda: kafka_authorizer_counts(jmx)),
                   System("ottla", ottla.bootstrap, f"127.0.0.1:{ottla_sasl}",
                          ottla.controller, ottla.log_path,
                          lambda: ottla_authorizer_counts(prometheus)))
    finally:
        try:
            ottla.stop()
        finally:
            kafka.stop()


def jmx_options(port: int) -> tuple[str, ...]:
    """A JVM's remote JMX on 127.0.0.1:``port``, without authentication or TLS."""
    return ("-Dcom.sun.management.jmxremote", f"-Dcom.sun.management.jmxremote.port={port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={port}",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false", "-Djava.rmi.server.hostname=127.0.0.1")


def as_count(rate_per_minute: float) -> int:
    return round(rate_per_minute * METRICS_WINDOW_MS / 60_000)


def kafka_authorizer_counts(jmx: int) -> Counts:
    """Kafka's authorizer beans, read with Kafka's JmxTool: each
    ``kafka.server:type=plugins,...,role=R`` attribute ``A`` as ``(R, A)``."""
    done = run_tool("org.apache.kafka.tools.JmxTool", "--jmx-url",
                    f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{jmx}/jmxrmi", "--object-name",
                    f"kafka.server:{PLUGIN},*", "--one-time", "--report-format",
                    "properties", check=True)
    counts: Counts = {}
    for line in done.stdout.splitlines():
        bean, _, value = line.rpartition("=")
        if not bean.startswith(f"kafka.server:{PLUGIN},role="):
            continue
        role, _, attribute = bean.removeprefix(f"kafka.server:{PLUGIN},role=").partition(":")
        counts[role, attribute] = (int(float(value)) if attribute == "acls-total-count"
                                   else as_count(float(value)))
    return counts


def ottla_authorizer_counts(port: int) -> Counts:
    """The same from Ottla's /metrics: ``kafka_server_plugins_<attribute>{role}``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts: Counts = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("kafka_server_plugins_"):
            continue
        attribute = family.name.removeprefix("kafka_server_plugins_").replace("_", "-")
        for sample in family.samples:
            assert sample.labels["config"] == "authorizer.class.name"
            assert sample.labels["class"] == "StandardAuthorizer"
            counts[sample.labels["role"], attribute] = (
                int(sample.value) if attribute == "acls-total-count"
                else as_count(sample.value))
    return counts


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def create_topics(system: System, *names: str) -> None:
    admin = system.admin()  # held until the futures complete: a freed client fails them
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names])
    for future in futures.values():
        future.result(30)


def binding(resource: ResourceType, name: str, principal: str, operation: AclOperation,
            permission: AclPermissionType = AclPermissionType.ALLOW,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def grant(system: System, *bindings: AclBinding) -> None:
    """Create the ACLs and wait until the node's own authorizer lists them (DescribeAcls
    answers from it, on Kafka as on Ottla)."""
    admin = system.admin()
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)

    def listed() -> bool:
        found = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
            AclOperation.ANY, AclPermissionType.ANY)).result(30)
        return all(b in found for b in bindings)
    wait_until(listed, 30, 0.2, f"{system.name} to list {bindings}")


def produce(system: System, user: str, topic: str, **settings: Any) -> str:
    """Produce one record as ``user``: "ok", or the name of the error it was refused with."""
    outcome: list[str] = []

    def delivered(err: KafkaError | None, _message: object) -> None:
        outcome.append("ok" if err is None else err.name())
    producer = Producer(system.user(user, **{"acks": "all", "message.timeout.ms": 20000,
                                             **settings}))
    producer.produce(topic, value=b"from " + user.encode(), on_delivery=delivered)
    producer.flush(40)
    return outcome[0] if outcome else "no report"


def consume(system: System, user: str, topic: str, group: str) -> str | list[bytes]:
    """Subscribe as ``user`` in ``group``: the values it reads up to the end of the
    topic (one record written by the administrator), or the first error it reports."""
    consumer = Consumer(system.user(user, **{"group.id": group,
                                             "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    error: list[str] = []

    def polled() -> bool:
        message = consumer.poll(0.5)
        if message is None:
            return False
        if message.error() is not None:
            error.append(message.error().name())
            return True
        got.append(message.value())
        return True
    try:
        wait_until(polled, 40, 0, f"a record or an error for {user} on {system.name}")
    finally:
        consumer.close()
    return error[0] if error else got


def write_as_admin(system: System, topic: str) -> None:
    producer = Producer({"bootstrap.servers": system.plaintext, "acks": "all"})
    producer.produce(topic, value=b"from admin")
    assert producer.flush(30) == 0


# --- the steps --------------------------------------------------------------------------

def test_without_acls_a_user_can_neither_write_nor_see_a_topic(pair) -> None:
    topic = unique("closed-")

    def step(system: System) -> tuple[str, list[str]]:
        create_topics(system, topic)
        seen = AdminClient(system.user("alice")).list_topics(timeout=20).topics
        return produce(system, "alice", topic), sorted(t for t in seen if t == topic)
    kafka, ottla = pair.both(step)
    assert kafka == ("TOPIC_AUTHORIZATION_FAILED", [])
    assert ottla == kafka


def test_a_prefixed_write_acl_opens_only_the_topics_under_its_prefix(pair) -> None:
    prefix = unique("orders-")
    inside, outside = f"{prefix}eu", unique("payments-")

    def step(system: System) -> tuple[str, str, str]:
        create_topics(system, inside, outside)
        grant(system, *(binding(ResourceType.TOPIC, prefix, "User:alice", operation,
                                pattern=ResourcePatternType.PREFIXED)
                        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)))
        return (produce(system, "alice", inside),
                produce(system, "alice", inside, **{"enable.idempotence": True}),
                produce(system, "alice", outside))
    kafka, ottla = pair.both(step)
    assert kafka == ("ok", "ok", "TOPIC_AUTHORIZATION_FAILED")
    assert ottla == kafka


def test_a_consumer_needs_read_on_its_group_as_well_as_on_the_topic(pair) -> None:
    topic, group = unique("reads-"), unique("readers-")

    def step(system: System) -> tuple[str | list[bytes], str | list[bytes]]:
        create_topics(system, topic)
        write_as_admin(system, topic)
        grant(system, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ))
        without_group = consume(system, "alice", topic, group)
        grant(system, binding(ResourceType.GROUP, group, "User:alice", AclOperation.READ))
        return without_group, consume(system, "alice", topic, group)
    kafka, ottla = pair.both(step)
    assert kafka == ("GROUP_AUTHORIZATION_FAILED", [b"from admin"])
    assert ottla == kafka


def audit_lines(system: System, *names: str) -> set[str]:
    """The distinct messages of the node's audit log (``kafka.authorizer.logger``, at
    INFO: the denials) that name one of ``names``; how often each is logged depends on
    the clients' retries, so only which ones are compared."""
    found = set()
    with open(system.log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            line = line.rstrip("\n")
            if not line.endswith(" (kafka.authorizer.logger)"):
                continue
            message = line.split("] INFO ", 1)[-1].removesuffix(" (kafka.authorizer.logger)")
            if any(f":LITERAL:{name} " in message for name in names):
                found.add(message)
    return found


def test_denials_are_audited_in_kafkas_words(pair) -> None:
    """Kafka logs each request's denial of a resource it named at INFO on
    ``kafka.authorizer.logger``; Ottla logs the same lines (same request, operation,
    resource and rule) to its log."""
    closed, readable, group = unique("audited-"), unique("audited-read-"), unique("audit-g-")

    def step(system: System) -> set[str]:
        create_topics(system, closed, readable)
        write_as_admin(system, readable)
        grant(system, binding(ResourceType.TOPIC, readable, "User:alice", AclOperation.READ))
        assert produce(system, "alice", closed) == "TOPIC_AUTHORIZATION_FAILED"
        assert consume(system, "alice", readable, group) == "GROUP_AUTHORIZATION_FAILED"
        alice = AdminClient(system.user("alice"))
        assert closed not in alice.list_topics(timeout=20).topics  # a listing: no INFO
        with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
            alice.delete_topics([closed])[closed].result(30)
        expected = (f"Principal = User:alice is Denied operation = DESCRIBE from host = "
                    f"127.0.0.1 on resource = Topic:LITERAL:{closed} for request = Metadata "
                    f"with resourceRefCount = 1 based on rule DefaultDeny")
        wait_until(lambda: expected in audit_lines(system, closed), 10, 0.2,
                   f"{system.name} to audit alice's produce")
        return audit_lines(system, closed, readable, group)
    kafka, ottla = pair.both(step)
    assert any("for request = Metadata" in line for line in kafka)
    assert any(f"Group:LITERAL:{group}" in line for line in kafka)
    assert any("for request = DeleteTopics" in line for line in kafka)
    assert ottla == kafka


def test_a_deny_wins_over_an_allow_for_everyone(pair) -> None:
    topic, groups = unique("shared-"), unique("everyone-")

    def step(system: System) -> tuple[str | list[bytes], str | list[bytes]]:
        create_topics(system, topic)
        write_as_admin(system, topic)
        grant(system,
              binding(ResourceType.TOPIC, topic, "User:*", AclOperation.READ),
              binding(ResourceType.GROUP, groups, "User:*", AclOperation.READ,
                      pattern=ResourcePatternType.PREFIXED),
              binding(ResourceType.TOPIC, topic, "User:bob", AclOperation.READ,
                      AclPermissionType.DENY))
        return (consume(system, "alice", topic, f"{groups}alice"),
                consume(system, "bob", topic, f"{groups}bob"))
    kafka, ottla = pair.both(step)
    assert kafka == ([b"from admin"], "TOPIC_AUTHORIZATION_FAILED")
    assert ottla == kafka


def test_a_transactional_producer_needs_write_on_its_transactional_id(pair) -> None:
    topic, txn = unique("txn-"), unique("alice-txn-")

    def init(system: System) -> str:
        producer = Producer(system.user("alice", **{"transactional.id": txn}))
        try:
            producer.init_transactions(30)
        except KafkaException as e:
            return e.args[0].name()
        producer.begin_transaction()
        producer.produce(topic, value=b"in a transaction")
        producer.commit_transaction(30)
        return "committed"

    def step(system: System) -> tuple[str, str]:
        create_topics(system, topic)
        grant(system, binding(ResourceType.TOPIC, topic, "User:alice", AclOperation.WRITE))
        refused = init(system)
        grant(system, binding(ResourceType.TRANSACTIONAL_ID, txn, "User:alice",
                              AclOperation.WRITE))
        return refused, init(system)
    kafka, ottla = pair.both(step)
    assert kafka == ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "committed")
    assert ottla == kafka


def test_admin_operations_of_a_user_follow_the_cluster_and_topic_acls(pair) -> None:
    mine, theirs = unique("alices-"), unique("admins-")

    def result(future: Any) -> str:
        try:
            value = future.result(30)
        except KafkaException as e:
            return e.args[0].name()
        return f"{len(value)} found" if isinstance(value, list) else "ok"

    def step(system: System) -> dict[str, str]:
        create_topics(system, theirs)
        grant(system, binding(ResourceType.TOPIC, theirs, "User:bob", AclOperation.READ))
        alice = AdminClient(system.user("alice"))  # may not see that ACL (no DESCRIBE)
        outcome = {
            "create": result(alice.create_topics([NewTopic(mine, 1, 1)])[mine]),
            "delete": result(alice.delete_topics([theirs])[theirs]),
            "describe acls": result(alice.describe_acls(AclBindingFilter(
                ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                AclOperation.ANY, AclPermissionType.ANY))),
        }
        grant(system, binding(ResourceType.BROKER, "kafka-cluster", "User:alice",
                              AclOperation.CREATE),
              binding(ResourceType.TOPIC, theirs, "User:alice", AclOperation.DELETE))
        outcome["create with CREATE"] = result(
            alice.create_topics([NewTopic(mine, 1, 1)])[mine])
        outcome["delete with DELETE"] = result(alice.delete_topics([theirs])[theirs])
        return outcome
    kafka, ottla = pair.both(step)
    assert kafka == {"create": "TOPIC_AUTHORIZATION_FAILED",
                     "delete": "TOPIC_AUTHORIZATION_FAILED",
                     # librdkafka drops DescribeAcls' top-level error: an empty list
                     "describe acls": "0 found",
                     "create with CREATE": "ok", "delete with DELETE": "ok"}
    assert ottla == kafka


def test_kafka_acls_adds_lists_and_removes_the_same_way(pair) -> None:
    """Kafka's own ``kafka-acls`` (the Java Admin client) as the administrator."""
    topic = unique("tool-")
    sides = [Side(s.name, s.plaintext) for s in (pair.kafka, pair.ottla)]
    added, = run_all(sides, [
        ["kafka-acls", "--bootstrap-server", "{bootstrap}", "--add", "--allow-principal",
         "User:carol", "--producer", "--topic", topic],
    ])
    assert sorted(rows(added.ottla)) == sorted(rows(added.kafka)), added.describe()
    listed, = run_all(sides, [["kafka-acls", "--bootstrap-server", "{bootstrap}", "--list",
                               "--topic", topic]])
    assert sorted(rows(listed.ottla)) == sorted(rows(listed.kafka)), listed.describe()
    assert "operation=WRITE" in listed.kafka and "operation=CREATE" in listed.kafka
    removed, = run_all(sides, [["kafka-acls", "--bootstrap-server", "{bootstrap}",
                                "--remove", "--force", "--topic", topic]])
    assert removed.ottla == removed.kafka, removed.describe()
    after, = run_all(sides, [["kafka-acls", "--bootstrap-server", "{bootstrap}", "--list",
                              "--topic", topic]])
    assert after.ottla == after.kafka, after.describe()
    assert "operation=" not in after.kafka


def test_the_authorizer_metrics_count_each_decision_as_kafkas_do(pair) -> None:
    """Kafka's StandardAuthorizer counts every action it decides in
    ``authorization-{request,allowed,denied}-rate-per-minute`` (read back as counts:
    the window is fixed) and its ACLs in ``acls-total-count``; a combined node's broker
    and controller authorizers share the sensors (same names in one Metrics), so both
    roles' beans count every decision. Bob's DescribeConfigs of a topic he may not
    describe is one denied decision, of a topic he may, one allowed."""
    closed, opened = unique("counted-"), unique("counted-open-")

    def step(system: System) -> tuple[Counts, Counts]:
        create_topics(system, closed, opened)
        grant(system, binding(ResourceType.TOPIC, opened, "User:bob",
                              AclOperation.DESCRIBE_CONFIGS))
        bob = AdminClient(system.user("bob"))
        assert bob.list_topics(timeout=20).brokers  # connected and authenticated
        before = system.authorizer_counts()
        denied = bob.describe_configs([ConfigResource("topic", closed)])
        with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
            next(iter(denied.values())).result(30)
        allowed = bob.describe_configs([ConfigResource("topic", opened)])
        assert next(iter(allowed.values())).result(30)
        after = system.authorizer_counts()
        return before, after
    (kafka_before, kafka_after), (ottla_before, ottla_after) = pair.both(step)
    rates = ("authorization-allowed-rate-per-minute", "authorization-denied-rate-per-minute",
             "authorization-request-rate-per-minute")

    def moved(before: Counts, after: Counts) -> dict[str, tuple[int, ...]]:
        """Each rate's count moved, per role (broker, controller)."""
        return {rate: tuple(after[role, rate] - before[role, rate]
                            for role in ("broker", "controller")) for rate in rates}
    for counts in (kafka_before, kafka_after, ottla_before, ottla_after):
        for role in ("broker", "controller"):  # each decision is allowed or denied
            assert counts[role, rates[2]] == counts[role, rates[0]] + counts[role, rates[1]]
    kafka, ottla = moved(kafka_before, kafka_after), moved(ottla_before, ottla_after)
    # The allowed counts also take in the node's own broker heartbeats (CLUSTER_ACTION
    # on the controller listener, every 2 s) that fall between the two readings.
    allowed, denied, _ = rates
    assert kafka[denied] == (1, 1)
    assert kafka[allowed][0] == kafka[allowed][1] >= 1
    assert ottla[denied] == kafka[denied]
    assert ottla[allowed][0] == ottla[allowed][1] >= 1
    for role in ("broker", "controller"):
        assert (ottla_after[role, "acls-total-count"] == kafka_after[role, "acls-total-count"]
                == kafka_before[role, "acls-total-count"])
