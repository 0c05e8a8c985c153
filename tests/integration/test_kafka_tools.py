"""Kafka's own command-line tools (kafka-topics, kafka-configs, kafka-client-metrics,
kafka-consumer-groups, kafka-share-groups, kafka-transactions, kafka-metadata-quorum,
kafka-features, kafka-log-dirs, kafka-get-offsets, kafka-dump-log) run through their main
classes against one Ottla node and one Apache Kafka 4.4 node set up the same way: the
same topics, the same record batches (byte for byte), the same groups and transactions.
Kafka's output is the expectation, because it is what a user of the tools knows: each
test normalises what differs by nature (addresses, cluster and topic ids, wall-clock
times, paths) and compares the rest. Where the two cannot agree, ``DIFFERENCES`` says how
and why, and a normaliser named after it takes out exactly that difference
(docs/compatibility.md lists them)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.helpers import OttlaProcess, wait_until
from tests.kafka_ref.cluster import broker_defaults, single_node
from tests.kafka_tools import (
    Run,
    Side,
    blank,
    produce_batch,
    require_kafka,
    rows,
    run_all,
    write_tools_archive,
)


@dataclass(frozen=True)
class Difference:
    """Where a tool's output on Ottla differs from Kafka 4.4's, why, and whether that is a
    bug in Ottla (else: by design, or a Kafka level Ottla does not reach)."""

    tool: str
    what: str
    why: str
    bug: bool


DIFFERENCES: dict[str, Difference] = {
    "member-epochs": Difference(
        "kafka-consumer-groups and kafka-share-groups --describe --members/--state --verbose",
        "the GROUP-EPOCH, TARGET-ASSIGNMENT-EPOCH, ASSIGNMENT-EPOCH, CURRENT-EPOCH, "
        "TARGET-EPOCH and MEMBER-EPOCH of a group with one member: 1 on Ottla, 2 (consumer) "
        "or 3 (share) on Kafka",
        "epochs are opaque counters; Kafka bumps them once more as the member's subscribed "
        "topics' metadata arrives (and, for share groups, computes the assignment after the "
        "first heartbeat), Ottla assigns in the first heartbeat", False),
    "features": Difference(
        "kafka-features describe",
        "Ottla has no streams.version feature, and its node's quorum is static "
        "(kraft.version 0; Kafka's quickstart node: 1)",
        "there are no streams groups (a node supporting level 0 only does not list the "
        "feature, as Kafka's BrokerFeatures); kraft.version is an upgrade away "
        "(kafka-features upgrade --feature kraft.version=1)", False),
}

BASE_TS = (int(time.time()) // 3600 - 1) * 3600 * 1000
"""CreateTime of the first record: an hour ago on the hour, the same on both sides, well
within retention and segment.ms (no segment rolls or goes)."""


@dataclass
class Nodes:
    """The two nodes and what each test shares: their sides, live clients to close."""

    ottla: Side
    kafka: Side
    clients: list[Any] = field(default_factory=list)

    @property
    def sides(self) -> tuple[Side, Side]:
        return self.ottla, self.kafka


def _cluster_id(data_dir: Path) -> str:
    props = dict(line.split("=", 1) for line in
                 (data_dir / "meta.properties").read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    return props["cluster.id"]


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> Iterator[Nodes]:
    """One Ottla node and one Kafka node, configured alike (Kafka's single-node defaults,
    the share tests' fast heartbeats), both populated by ``populate``: one pair of nodes
    for the module, because a Kafka node costs seconds to start and each tool a JVM."""
    libs = require_kafka()
    base = tmp_path_factory.mktemp("kafka-tools")
    (base / "ottla").mkdir()
    ottla = OttlaProcess(str(base / "ottla" / "data"), overrides={
        **broker_defaults(1), "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    kafka = single_node(base / "kafka")
    clients: list[Any] = []
    ottla.start(wait=False)
    try:
        kafka.start()
        ottla.wait_ready()
        both = Nodes(
            Side("ottla", ottla.bootstrap, ottla.controller, _cluster_id(Path(ottla.data_dir)),
                 Path(ottla.data_dir)),
            Side("kafka", kafka.bootstrap, kafka.bootstrap_controller, kafka.cluster_id,
                 kafka.nodes[1].data_dir), clients)
        with ThreadPoolExecutor(3) as pool:  # Kafka's share groups take seconds to form
            pending = [pool.submit(populate, side, clients) for side in both.sides]
            pending.append(pool.submit(write_tools_archive, libs, ottla.bootstrap))
            for done in pending:
                done.result()
        yield both
    finally:
        try:
            for client in reversed(clients):
                client.close()
        finally:
            try:
                ottla.stop()
            finally:
                kafka.stop()


def retry(call, timeout: float = 30) -> Any:
    """``call`` until it does not raise a KafkaException (a group coordinator that is
    still loading, a topic not yet everywhere in the metadata)."""
    failure: list[BaseException] = []

    def attempt() -> Any:
        try:
            return call() or True
        except KafkaException as e:
            failure[:] = [e]
            return False
    return wait_until(attempt, timeout, 0.2, lambda: f"{call} ({failure})")


GROUP_OFFSETS = {("orders", 0): 5, ("orders", 1): 3}
RESET_GROUPS = ("g-earliest", "g-latest", "g-offset", "g-shift", "g-datetime", "g-dry")
"""Idle groups with ``GROUP_OFFSETS`` committed, one per --reset-offsets variant, so that
the variants run at once."""
DUMPED_BATCHES: list[tuple[list[tuple[bytes | None, bytes | None,
                                      tuple[tuple[str, bytes | None], ...]]], int]] = [
    ([(b"alpha", b"one", (("trace", b"t-1"), ("tenant", b"acme"))), (None, b"two", ()),
      (b"gamma", None, (("empty", None),))], 0),
    ([(b"g1", b"gzipped " * 8, ()), (b"g2", b"gzipped again", ())], 1),
    ([(b"s1", b"snappy " * 8, ())], 2),
    ([(b"l1", b"lz4 " * 8, ()), (b"l2", b"lz4", (("h", b"v"),))], 3),
    ([(b"z1", b"zstd " * 8, ())], 4),
    ([(f"big{i}".encode(), bytes([65 + i]) * 2000, ()) for i in range(3)], 0),
    ([(b"after-big", b"indexed", ())], 0),
]
"""The batches of topic ``dumped`` (records, codec): headers, null keys and values, every
codec, and more than index.interval.bytes (4096) before the last, which gets an offset
and a time index entry."""


def populate(side: Side, clients: list[Any]) -> None:
    """The same topics, records, groups and transactions on a side."""
    admin = AdminClient({"bootstrap.servers": side.bootstrap})
    for future in admin.create_topics([
            NewTopic("orders", 3, 1), NewTopic("jobs", 1, 1), NewTopic("dumped", 1, 1),
            NewTopic("payments", 1, 1),
            NewTopic("configured", 1, 1, config={"segment.ms": "3600000"})]).values():
        future.result(30)
    for p in range(3):
        produce_batch(side.bootstrap, "orders", p, [
            (f"k{p}-{i}".encode(), f"order-{p}-{i}".encode(), ()) for i in range(10)],
            BASE_TS + p * 100_000, ts_step=1000)
    produce_batch(side.bootstrap, "jobs", 0, [(None, f"job-{i}".encode(), ())
                                              for i in range(10)], BASE_TS)
    for i, (records, codec) in enumerate(DUMPED_BATCHES):
        produce_batch(side.bootstrap, "dumped", 0, records, BASE_TS + i * 10_000, codec=codec)

    commit(side.bootstrap, (*RESET_GROUPS, "g-gone", "g-trimmed"), GROUP_OFFSETS)
    clients.append(live_consumer(side.bootstrap, "g-live", "consumer", "live-1"))
    clients.append(live_consumer(side.bootstrap, "g-classic", "classic", "classic-1"))
    populate_share_groups(side, clients)
    populate_transactions(side, clients)


def commit(bootstrap: str, groups: Sequence[str], offsets: dict[tuple[str, int], int]
           ) -> None:
    """Commit ``offsets`` for each of ``groups`` (which have no members), as
    AlterConsumerGroupOffsets does: one admin client for all of them (a consumer per
    group would cost a join's worth of round trips each)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    for group in groups:
        retry(lambda g=group: committed(admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g, partitions)])[g].result(30)))


def committed(result: ConsumerGroupTopicPartitions) -> ConsumerGroupTopicPartitions:
    """``result`` once every partition's offset is committed: the admin client reports
    a partition's error in the partition, so it is raised here, to retry."""
    for tp in result.topic_partitions:
        if tp.error is not None:
            raise KafkaException(tp.error)
    return result


def live_consumer(bootstrap: str, group: str, protocol: str, client_id: str) -> Consumer:
    """A member of ``group`` that has read all of ``orders`` and committed, and stays in
    the group (librdkafka heartbeats in the background) until the module ends."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "group.protocol": protocol, "client.id": client_id,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "max.poll.interval.ms": 600_000})
    consumer.subscribe(["orders"])
    seen: list[Any] = []

    def read_all() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message)
        return len(seen) >= 30
    wait_until(read_all, 60, 0, f"{group} on {bootstrap} to read orders ({len(seen)})")
    consumer.commit(asynchronous=False)
    return consumer


def populate_share_groups(side: Side, clients: list[Any]) -> None:
    """sg-done: 6 of jobs' 10 records accepted, 4 released, no members; sg-gone: all
    accepted, no members (to delete); sg-live: a member still in the group. The three
    at once: a share group takes Kafka a few heartbeats to form."""
    set_share_reset(side.bootstrap, "sg-done", "sg-gone", "sg-live")

    def acknowledged(group: str, accepted: int) -> None:
        member = ShareConsumer({"bootstrap.servers": side.bootstrap, "group.id": group,
                                "client.id": f"{group}-1",
                                "share.acknowledgement.mode": "explicit"})
        try:
            member.subscribe(["jobs"])
            for m in share_receive(member, 10):
                member.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < accepted
                                   else AcknowledgeType.RELEASE)
            member.commit_sync(30)
        finally:
            member.close()

    def live() -> None:
        member = ShareConsumer({"bootstrap.servers": side.bootstrap, "group.id": "sg-live",
                                "client.id": "sg-live-1"})
        clients.append(member)
        member.subscribe(["jobs"])
        share_receive(member, 10)

    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(acknowledged, "sg-done", 6),
                     pool.submit(acknowledged, "sg-gone", 10), pool.submit(live)]:
            done.result()


def set_share_reset(bootstrap: str, *groups: str) -> None:
    """share.auto.offset.reset=earliest for ``groups``: records already written are
    delivered to their first member."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ConfigResource.Type.GROUP, g, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)]) for g in groups]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


def share_receive(member: ShareConsumer, count: int) -> list[Any]:
    got: list[Any] = []

    def enough() -> bool:
        got.extend(m for m in member.poll(0.3) or [] if m.error() is None)
        return len(got) >= count
    wait_until(enough, 60, 0, lambda: f"{count} records for a share member ({len(got)})")
    return got


def populate_transactions(side: Side, clients: list[Any]) -> None:
    """tx-done: committed; tx-open: open on payments-0 (a long timeout: it stays open)."""
    done = Producer({"bootstrap.servers": side.bootstrap, "transactional.id": "tx-done"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce("payments", key=b"p1", value=b"paid", partition=0, timestamp=BASE_TS)
    done.commit_transaction(30)
    opened = Producer({"bootstrap.servers": side.bootstrap, "transactional.id": "tx-open",
                       "transaction.timeout.ms": 900_000})
    opened.init_transactions(30)
    opened.begin_transaction()
    opened.produce("payments", key=b"p2", value=b"pending", partition=0,
                   timestamp=BASE_TS + 1000)
    opened.flush(30)
    clients.append(Open(opened))


@dataclass
class Open:
    """A producer kept (its transaction open) until the module ends."""

    producer: Producer

    def close(self) -> None:
        self.producer.abort_transaction(30)


MEMBER_ID = re.compile(
    r"\b[\w.-]+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # classic
    r"|(?<=\s)[A-Za-z0-9+/_-]{22}(?=\s)")  # a Uuid in base64: consumer and share members
TOPIC_ID = re.compile(r"TopicId: \S+")


def same(run: Run, normalise: Callable[[str], str] = lambda text: text, sort: bool = False,
         kafka: Callable[[str], str] = lambda text: text,
         ottla: Callable[[str], str] = lambda text: text) -> str:
    """Assert both sides printed the same, after ``normalise``, and ``kafka`` or ``ottla``
    on that side only (a difference of ``DIFFERENCES``, taken out); sorted line by line
    where the tool prints in no defined order (a hash map's). Returns Ottla's text."""
    ottla_text, kafka_text = normalise(ottla(run.ottla)), normalise(kafka(run.kafka))
    if sort:
        ottla_text, kafka_text = "\n".join(sorted(ottla_text.splitlines())), "\n".join(
            sorted(kafka_text.splitlines()))
    assert ottla_text == kafka_text, run.describe()
    return ottla_text


def failed_alike(run: Run) -> str:
    """Assert both sides failed with exit code 1 and printed the same; returns it."""
    assert run.code("ottla") == run.code("kafka") == 1, run.describe()
    ottla = run.out("ottla", check=False)
    assert ottla == run.out("kafka", check=False), run.describe()
    return ottla


def tool(name: str, *args: str) -> list[str]:
    """A command for ``run_all``: a bin/ script name and its arguments, with
    ``--bootstrap-server {bootstrap}`` first for the admin tools."""
    return [name, "--bootstrap-server", "{bootstrap}", *args]


# --- kafka-topics --------------------------------------------------------------------


def test_kafka_topics_create_list_describe_alter_delete(nodes: Nodes) -> None:
    """The whole life of a topic through kafka-topics, with Kafka's errors for a topic
    that exists, an invalid config and fewer partitions."""
    created, doomed, exists, invalid = run_all(nodes.sides, [
        tool("kafka-topics", "--create", "--topic", "tool-topic", "--partitions", "2",
             "--replication-factor", "1", "--config", "retention.ms=3600000",
             "--config", "cleanup.policy=compact"),
        tool("kafka-topics", "--create", "--topic", "doomed", "--partitions", "1"),
        tool("kafka-topics", "--create", "--topic", "orders", "--partitions", "1"),
        tool("kafka-topics", "--create", "--topic", "bad", "--config", "retention.ms=soon"),
    ])
    assert same(created) == "Created topic tool-topic.\n"
    assert same(doomed) == "Created topic doomed.\n"
    assert "Topic 'orders' already exists." in failed_alike(exists)
    assert "retention.ms" in failed_alike(invalid)

    described, shrink = run_all(nodes.sides, [
        tool("kafka-topics", "--describe", "--topic", "tool-topic"),
        tool("kafka-topics", "--alter", "--topic", "orders", "--partitions", "2"),
    ])
    text = same(described, lambda t: TOPIC_ID.sub("TopicId: <id>", t))
    assert "PartitionCount: 2\tReplicationFactor: 1\tConfigs: min.insync.replicas=1," \
           "cleanup.policy=compact,retention.ms=3600000" in text
    assert shrink.code("ottla") == shrink.code("kafka") == 1, shrink.describe()
    for side in ("ottla", "kafka"):
        assert "Error while executing topic command : The topic orders currently has 3 " \
               "partition(s); 2 would not be an increase." in shrink.out(side, check=False)

    grown, deleted = run_all(nodes.sides, [
        tool("kafka-topics", "--alter", "--topic", "tool-topic", "--partitions", "4"),
        tool("kafka-topics", "--delete", "--topic", "doomed")])
    assert same(grown) == same(deleted) == ""

    described, listed = run_all(nodes.sides, [
        tool("kafka-topics", "--describe", "--topic", "tool-topic"),
        tool("kafka-topics", "--list")])
    text = same(described, lambda t: TOPIC_ID.sub("TopicId: <id>", t))
    assert [r[:4] for r in rows(text)[1:]] == [
        ("Topic:", "tool-topic", "Partition:", str(p)) for p in range(4)]
    assert same(listed) == "".join(f"{t}\n" for t in sorted(
        ["__consumer_offsets", "__share_group_state", "__transaction_state", "configured",
         "dumped", "jobs", "orders", "payments", "tool-topic"]))


# --- kafka-configs -------------------------------------------------------------------


def config_lines(text: str) -> dict[str, str]:
    """kafka-configs --describe's entries: key -> the rest of its line."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^  ([^=\s]+)=(.*)$", text, re.M)}


def test_kafka_configs_describe_and_alter_topics_brokers_and_groups(nodes: Nodes) -> None:
    """Dynamic configs of a topic, a broker, the cluster default and a group: described,
    added and deleted, each step as Kafka prints it."""
    configs = ["kafka-configs", "--bootstrap-server", "{bootstrap}"]
    describe = [*configs, "--describe"]
    topic, broker, default, group = (
        ["--entity-type", "topics", "--entity-name", "configured"],
        ["--entity-type", "brokers", "--entity-name", "1"],
        ["--entity-type", "brokers", "--entity-default"],
        ["--entity-type", "groups", "--entity-name", "g-earliest"])
    runs = run_all(nodes.sides, [[*describe, *topic], [*describe, *default]])
    assert same(runs[0]) == (
        "Dynamic configs for topic configured are:\n  segment.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=3600000}\n")
    assert same(runs[1]) == (
        "Default configs for brokers in the cluster are:\n  min.insync.replicas=1 "
        "sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}\n")

    alter = [*configs, "--alter"]
    runs = run_all(nodes.sides, [
        [*alter, *topic, "--add-config", "retention.ms=7200000,cleanup.policy=[compact,delete]",
         "--delete-config", "segment.ms"],
        [*alter, *broker, "--add-config", "log.cleaner.threads=2"],
        [*alter, *default, "--add-config", "log.cleaner.backoff.ms=20000"],
        [*alter, *group, "--add-config", "consumer.heartbeat.interval.ms=6000"],
        [*alter, *topic, "--add-config", "no.such.key=1"],
        [*alter, *group, "--add-config", "consumer.session.timeout.ms=1000"]])
    assert [same(r) for r in runs[:4]] == [
        "Completed updating config for topic configured.\n",
        "Completed updating config for broker 1.\n",
        "Completed updating default config for brokers in the cluster.\n",
        "Completed updating config for group g-earliest.\n"]
    for refused in runs[4:]:
        assert refused.code("ottla") == refused.code("kafka") == 1, refused.describe()
        assert refused.err("ottla").splitlines()[0] == refused.err("kafka").splitlines()[0], \
            refused.describe()

    runs = run_all(nodes.sides, [[*describe, *topic], [*describe, *broker],
                                 [*describe, *default], [*describe, *group]])
    assert config_lines(same(runs[0])) == {
        "cleanup.policy": "compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                          "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy="
                          "delete}",
        "retention.ms": "7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                        "retention.ms=7200000}"}
    assert config_lines(same(runs[1]))["log.cleaner.threads"].startswith("2 sensitive=false")
    assert "log.cleaner.backoff.ms=20000" in same(runs[2])
    assert same(runs[3]).endswith(
        "consumer.heartbeat.interval.ms=6000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:"
        "consumer.heartbeat.interval.ms=6000, DEFAULT_CONFIG:group.consumer.heartbeat."
        "interval.ms=5000}\n")


def test_kafka_configs_through_the_controller(nodes: Nodes) -> None:
    """KIP-919: kafka-configs --bootstrap-controller describes the controller node's
    configs from the controller, as Kafka's controller answers them."""
    describe = ["kafka-configs", "--bootstrap-controller", "{controller}", "--describe"]
    runs = run_all(nodes.sides, [
        [*describe, "--entity-type", "topics", "--entity-name", "configured"],
        [*describe, "--entity-type", "brokers", "--entity-name", "1"],
        [*describe, "--entity-type", "brokers", "--entity-name", "7"]])
    # Kafka's admin client sends a topic's DescribeConfigs to brokers only.
    topic = runs[0]
    assert topic.code("ottla") == topic.code("kafka"), topic.describe()
    assert same(runs[1]).startswith("Dynamic configs for broker 1 are:\n")
    assert same(runs[2]) == "The broker '7' doesn't exist and doesn't have dynamic config.\n"


def test_kafka_cluster_unregister_of_an_unknown_broker(nodes: Nodes) -> None:
    """kafka-cluster unregister (UnregisterBroker, forwarded to the controller) of an id
    no broker has: refused the same way on both."""
    refused, = run_all(nodes.sides, [
        ["kafka-cluster", "unregister", "--bootstrap-server", "{bootstrap}", "--id", "7"]])
    assert refused.code("ottla") == refused.code("kafka") != 0, refused.describe()
    assert exception_lines(refused, "ottla") == exception_lines(refused, "kafka"), \
        refused.describe()
    assert any("BrokerIdNotRegisteredException: Broker ID 7 is not currently registered"
               in line for line in exception_lines(refused, "ottla")), refused.describe()


def test_kafka_cluster_unregister_controller_below_4_4_iv2(make_ottla, tmp_path) -> None:
    """kafka-cluster unregister-controller (UnregisterController, KIP-1220) on each
    listener, and the request itself: a Kafka 4.4 node at metadata.version 4.0-IV3
    refuses the active controller's own id, and any other before looking at its
    registration; so does an Ottla node formatted at 4.0-IV3."""
    from ottla.protocol.api import ApiKey
    from tests.helpers import WireClient, format_node
    from tests.kafka_ref.cluster import KafkaCluster, run_tool

    def story(bootstrap: str, controller: str) -> list[Any]:
        told = []
        for flag, address in (("--bootstrap-controller", controller),
                              ("--bootstrap-server", bootstrap)):
            done = run_tool("kafka-cluster", "unregister-controller", flag, address,
                            "--id", "2")
            told.append((done.returncode, done.stdout.strip(), [
                line for line in done.stderr.splitlines() if "Exception" in line and
                not line.startswith("\t")]))
        for address in (controller, bootstrap):
            for controller_id in (1, 2):
                with WireClient(address, timeout=10) as client:
                    response = client.request(ApiKey.UNREGISTER_CONTROLLER, 0,
                                              {"controller_id": controller_id})
                told.append((int(response.error_code), response.error_message))
        return told

    kafka = KafkaCluster(tmp_path / "kafka", controllers=1, brokers=0, combined=True,
                         format_flags=("--release-version", "4.0-IV3"))
    with kafka:
        expected = story(kafka.bootstrap, kafka.bootstrap_controller)
    assert expected[2:4] == [
        (42, "Controller cannot unregister itself while it is active."),
        (35, "The current MetadataVersion is too old to support controller "
             "unregistration.")], expected
    ottla = make_ottla(start=False)
    format_node(ottla, "4.0-IV3")
    ottla.start()
    assert story(ottla.bootstrap, ottla.controller) == expected


def exception_lines(run: Run, side: str) -> list[str]:
    """The lines of kafka-configs' stderr that name an exception (its message), without
    the stack trace."""
    return [line for line in run.err(side).splitlines()
            if "Exception" in line and not line.startswith("\t")]


def test_kafka_configs_client_quotas(nodes: Nodes) -> None:
    """Client quotas of users, client ids, a user's client id and the defaults: altered,
    refused (a key kafka-configs refuses itself, values the controller refuses) and
    described, each step as Kafka 4.4 prints it."""
    configs = ["kafka-configs", "--bootstrap-server", "{bootstrap}"]
    alter, describe = [*configs, "--alter"], [*configs, "--describe"]
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    default_client = ["--entity-type", "clients", "--entity-default"]
    alice_app = [*alice, "--entity-type", "clients", "--entity-name", "app"]
    runs = run_all(nodes.sides, [
        [*alter, *alice, "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"],
        [*alter, *default_client, "--add-config", "producer_byte_rate=1024"],
        [*alter, *alice_app, "--add-config", "request_percentage=12.5"],
        [*alter, "--entity-type", "users", "--entity-name", "bob", "--add-config", "bogus=1"],
        [*alter, "--entity-type", "clients", "--entity-name", "bad", "--add-config",
         "producer_byte_rate=-1"],
        [*alter, "--entity-type", "clients", "--entity-name", "bad", "--add-config",
         "consumer_byte_rate=1.5"],
        [*alter, "--entity-type", "users", "--entity-default", "--delete-config",
         "consumer_byte_rate"]])
    assert [same(r) for r in runs[:3]] == [
        "Completed updating config for user alice.\n",
        "Completed updating default config for clients in the cluster.\n",
        "Completed updating config for user alice.\n"]
    for refused in runs[3:]:
        assert refused.code("ottla") == refused.code("kafka") == 1, refused.describe()
        assert exception_lines(refused, "ottla") == exception_lines(refused, "kafka"), \
            refused.describe()
    assert "Unexpected config names: bogus" in runs[3].err("kafka")
    assert "Quota producer_byte_rate must be greater than 0" in runs[4].err("kafka")
    assert "consumer_byte_rate cannot be a fractional value." in runs[5].err("kafka")
    assert "Invalid config(s): consumer_byte_rate" in runs[6].err("kafka")

    runs = run_all(nodes.sides, [
        [*describe, "--entity-type", "users"], [*describe, "--entity-type", "clients"],
        [*describe, *alice], [*describe, "--entity-type", "users", "--entity-type", "clients"],
        [*describe, *default_client]])
    assert same(runs[0]) == ("Quota configs for user-principal 'alice' are "
                             "consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0\n")
    assert same(runs[1]) == \
        "Quota configs for the default client-id are producer_byte_rate=1024.0\n"
    assert same(runs[2]) == same(runs[0])
    assert same(runs[3]) == ("Quota configs for user-principal 'alice', client-id 'app' are "
                             "request_percentage=12.5\n")
    assert same(runs[4]) == same(runs[1])

    runs = run_all(nodes.sides, [
        [*alter, *alice, "--delete-config", "consumer_byte_rate"],
        [*alter, *default_client, "--delete-config", "producer_byte_rate"]])
    assert [same(r) for r in runs] == [
        "Completed updating config for user alice.\n",
        "Completed updating default config for clients in the cluster.\n"]
    runs = run_all(nodes.sides, [[*describe, "--entity-type", "users"],
                                 [*describe, "--entity-type", "clients"]])
    assert same(runs[0]) == \
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n"
    assert same(runs[1]) == ""


# --- kafka-client-metrics ------------------------------------------------------------


def test_kafka_client_metrics_alter_describe_list_delete(nodes: Nodes) -> None:
    """KIP-714 subscriptions through kafka-client-metrics: CLIENT_METRICS configs set with
    IncrementalAlterConfigs, described with their defaults, listed with
    ListConfigResources, refused with Kafka's message, deleted."""
    command = ["kafka-client-metrics", "--bootstrap-server", "{bootstrap}"]
    altered, generated, refused = run_all(nodes.sides, [
        [*command, "--alter", "--name", "tool-sub", "--metrics",
         "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "1000",
         "--match", "client_id=tool-.*,client_software_name=apache-kafka-java"],
        [*command, "--alter", "--name", "tool-defaults", "--metrics", "*"],
        [*command, "--alter", "--name", "tool-bad", "--interval", "50"]])
    assert same(altered) == "Altered client metrics config for tool-sub.\n"
    assert same(generated) == "Altered client metrics config for tool-defaults.\n"
    assert "interval must be between 100 and 3600000 (1 hour)" in failed_alike(refused)
    described, listed, missing = run_all(nodes.sides, [
        [*command, "--describe", "--name", "tool-sub"], [*command, "--list"],
        [*command, "--describe", "--name", "nothing"]])
    assert same(described).splitlines()[1:] == [
        "  interval.ms=1000", "  match=client_id=tool-.*,client_software_name=apache-kafka-java",
        "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."]
    assert same(listed, sort=True) == "tool-defaults\ntool-sub"
    assert same(missing) == "The client metric resource nothing doesn't exist and doesn't " \
        "have dynamic config.\n"
    all_described, = run_all(nodes.sides, [[*command, "--describe"]])
    same(all_described, sort=True)
    deleted, = run_all(nodes.sides, [[*command, "--delete", "--name", "tool-sub"]])
    assert same(deleted) == "Deleted client metrics config for tool-sub.\n"
    listed, = run_all(nodes.sides, [[*command, "--list"]])
    assert same(listed) == "tool-defaults\n"


# --- kafka-consumer-groups -----------------------------------------------------------


def members(text: str) -> str:
    """Member ids (the coordinator's: random on each side) as ``<member>``."""
    return MEMBER_ID.sub("<member>", text)


def epochs(text: str, *columns: str, token: str = "<epoch>") -> str:
    """``text`` with the values of ``columns`` of every table in it as ``token``, after
    checking each is a positive number (DIFFERENCES["member-epochs"]): a table is a header
    line naming one of them and the rows after it up to a blank line."""
    out: list[str] = []
    blanked: list[int] = []
    for line in text.split("\n"):
        cells = line.split()
        if any(c in cells for c in columns):
            blanked = [i for i, c in enumerate(cells) if c in columns]
        elif not cells:
            blanked = []
        elif blanked:
            for i in blanked:
                assert int(cells[i]) > 0, line
                cells[i] = token
            line = " ".join(cells)
        out.append(line)
    return "\n".join(out)


def test_kafka_consumer_groups_list_and_describe(nodes: Nodes) -> None:
    """--list (with --state), --describe with --offsets, --members and --state, of idle
    groups, a KIP-848 consumer group and a classic one, each with a live member, and of
    a group that does not exist."""
    groups = ["kafka-consumer-groups", "--bootstrap-server", "{bootstrap}"]
    listed, states, everything, live_members, classic_members, live_state, classic_state, \
        unknown = run_all(nodes.sides, [
            [*groups, "--list"], [*groups, "--list", "--state"],
            [*groups, "--describe", "--all-groups"],
            [*groups, "--describe", "--group", "g-live", "--members", "--verbose"],
            [*groups, "--describe", "--group", "g-classic", "--members", "--verbose"],
            [*groups, "--describe", "--group", "g-live", "--state", "--verbose"],
            [*groups, "--describe", "--group", "g-classic", "--state"],
            [*groups, "--describe", "--group", "g-nope"]])
    idle = sorted([*RESET_GROUPS, "g-gone", "g-trimmed"])
    assert sorted(same(listed, sort=True).split()) == sorted([*idle, "g-live", "g-classic"])
    assert rows(same(states, sort=True)) == sorted(
        [("GROUP", "STATE"), ("g-classic", "Stable"), ("g-live", "Stable"),
         *[(g, "Empty") for g in idle]])
    text = same(everything, members)
    assert ("g-live", "orders", "0", "10", "10", "0", "<member>", "/127.0.0.1", "live-1") \
        in rows(text)
    assert ("g-earliest", "orders", "1", "3", "10", "7", "-", "-", "-") in rows(text)
    assert everything.err("ottla").count("has no active members") == len(idle)

    assert rows(same(live_members, lambda t: epochs(members(t), "CURRENT-EPOCH",
                                                    "TARGET-EPOCH")))[1] == (
        "g-live", "<member>", "/127.0.0.1", "live-1", "3", "<epoch>", "orders:0,1,2",
        "<epoch>", "orders:0,1,2")
    assert rows(same(classic_members, members))[1] == (
        "g-classic", "<member>", "/127.0.0.1", "classic-1", "3", "-", "orders:0,1,2", "-", "-")
    assert rows(same(live_state, lambda t: epochs(t, "GROUP-EPOCH",
                                                  "TARGET-ASSIGNMENT-EPOCH")))[1] == (
        "g-live", "<bootstrap>", "(1)", "uniform", "Stable", "<epoch>", "<epoch>", "1")
    assert rows(same(classic_state))[1] == (
        "g-classic", "<bootstrap>", "(1)", "range", "Stable", "1")
    assert "GroupIdNotFoundException: Group g-nope not found." in same(unknown)


def test_kafka_consumer_groups_reset_delete_offsets_and_delete(nodes: Nodes) -> None:
    """--reset-offsets in each of its forms (--execute, and --dry-run which changes
    nothing), refused for a group with members; --delete-offsets and --delete, refused
    for a group with members as Kafka refuses them."""
    from datetime import UTC, datetime

    groups = ["kafka-consumer-groups", "--bootstrap-server", "{bootstrap}"]
    reset = [*groups, "--reset-offsets"]
    when = datetime.fromtimestamp((BASE_TS + 5500) / 1000, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3]  # between orders-0's records 5 and 6
    runs = run_all(nodes.sides, [
        [*reset, "--group", "g-earliest", "--topic", "orders", "--to-earliest", "--execute"],
        [*reset, "--group", "g-latest", "--all-topics", "--to-latest", "--execute"],
        [*reset, "--group", "g-offset", "--topic", "orders:0,1", "--to-offset", "4",
         "--execute"],
        [*reset, "--group", "g-shift", "--topic", "orders:0,1", "--shift-by", "-2",
         "--execute"],
        [*reset, "--group", "g-datetime", "--topic", "orders", "--to-datetime", when,
         "--execute"],
        [*reset, "--group", "g-dry", "--topic", "orders", "--to-earliest", "--dry-run"],
        [*reset, "--group", "g-live", "--topic", "orders", "--to-earliest", "--execute"],
        [*groups, "--delete-offsets", "--group", "g-trimmed", "--topic", "orders:1"],
        [*groups, "--delete", "--group", "g-gone"],
        [*groups, "--delete", "--group", "g-live"],
        [*groups, "--delete-offsets", "--group", "g-live", "--topic", "orders"]])
    new_offsets = [{(r[1], r[2]): r[3] for r in rows(same(run))[1:]} for run in runs[:6]]
    assert new_offsets == [
        {("orders", "0"): "0", ("orders", "1"): "0", ("orders", "2"): "0"},
        {("orders", "0"): "10", ("orders", "1"): "10"},
        {("orders", "0"): "4", ("orders", "1"): "4"},
        {("orders", "0"): "3", ("orders", "1"): "1"},
        {("orders", "0"): "6", ("orders", "1"): "0", ("orders", "2"): "0"},
        {("orders", "0"): "0", ("orders", "1"): "0", ("orders", "2"): "0"}]
    assert "Assignments can only be reset if the group 'g-live' is inactive, but the " \
           "current state is Stable." in same(runs[6])
    assert "orders          1          Successful" in same(runs[7])
    assert same(runs[8]) == "Deletion of requested consumer groups ('g-gone') was successful.\n"
    assert "GroupNotEmptyException: The group is not empty." in same(runs[9])
    assert same(runs[10]).count("GroupSubscribedToTopicException") == 3

    described, listed, trimmed = run_all(nodes.sides, [
        [*groups, "--describe", *[a for g in RESET_GROUPS for a in ("--group", g)]],
        [*groups, "--list"], [*groups, "--describe", "--group", "g-trimmed"]])
    committed = {(r[0], r[2]): r[3] for r in rows(same(described)) if r[1] == "orders"}
    assert committed == {
        ("g-earliest", "0"): "0", ("g-earliest", "1"): "0", ("g-earliest", "2"): "0",
        ("g-latest", "0"): "10", ("g-latest", "1"): "10",
        ("g-offset", "0"): "4", ("g-offset", "1"): "4",
        ("g-shift", "0"): "3", ("g-shift", "1"): "1",
        ("g-datetime", "0"): "6", ("g-datetime", "1"): "0", ("g-datetime", "2"): "0",
        ("g-dry", "0"): "5", ("g-dry", "1"): "3"}
    assert "g-gone" not in same(listed, sort=True).split()
    assert [r[:4] for r in rows(same(trimmed))[1:2]] == [("g-trimmed", "orders", "0", "5")]


# --- kafka-share-groups --------------------------------------------------------------


def test_kafka_share_groups(nodes: Nodes) -> None:
    """kafka-share-groups: --list, --describe (offsets, --members, --state), then
    --reset-offsets (refused while a member is in the group), --delete and
    --delete-offsets, each as Kafka prints it."""
    sg = ["kafka-share-groups", "--bootstrap-server", "{bootstrap}"]
    listed, live_members, live_state, done_state, everything = run_all(nodes.sides, [
        [*sg, "--list"],
        [*sg, "--describe", "--group", "sg-live", "--members", "--verbose"],
        [*sg, "--describe", "--group", "sg-live", "--state", "--verbose"],
        [*sg, "--describe", "--group", "sg-done", "--state"],
        [*sg, "--describe", "--all-groups", "--verbose"]])
    assert same(listed, sort=True).split() == ["sg-done", "sg-gone", "sg-live"]
    assert rows(same(live_members, lambda t: epochs(members(t), "MEMBER-EPOCH")))[1] == (
        "sg-live", "<member>", "/127.0.0.1", "sg-live-1", "1", "<epoch>", "jobs:0")
    assert rows(same(live_state, lambda t: epochs(t, "GROUP-EPOCH", "ASSIGNMENT-EPOCH"))
                )[1] == ("sg-live", "<bootstrap>", "(1)", "Stable", "<epoch>", "<epoch>", "1")
    assert rows(same(done_state))[1] == ("sg-done", "<bootstrap>", "(1)", "Empty", "0")
    assert "Share group 'sg-done' has no active members." in done_state.err("ottla")
    assert [r for r in rows(same(everything))
            if r[0] != "GROUP"] == [("sg-done", "jobs", "0", "0", "0", "4"),
                                    ("sg-gone", "jobs", "0", "0", "0", "0"),
                                    ("sg-live", "jobs", "0", "0", "0", "10")]

    runs = run_all(nodes.sides, [
        [*sg, "--reset-offsets", "--group", "sg-done", "--topic", "jobs", "--to-earliest",
         "--execute"],
        [*sg, "--reset-offsets", "--group", "sg-live", "--all-topics", "--to-latest",
         "--dry-run"],
        [*sg, "--delete", "--group", "sg-gone"],
        [*sg, "--delete", "--group", "sg-live"],
        [*sg, "--delete-offsets", "--group", "sg-live", "--topic", "jobs"]])
    assert rows(same(runs[0]))[1] == ("sg-done", "jobs", "0", "0")
    assert failed_alike(runs[1]) == ""
    assert runs[1].err("ottla").splitlines()[0] == runs[1].err("kafka").splitlines()[0] \
        == "Share group 'sg-live' is not empty.", runs[1].describe()
    assert same(runs[2]) == "Deletion of requested share groups ('sg-gone') was successful.\n"
    assert "Share group 'sg-live' is not EMPTY." in same(runs[3])
    assert "jobs            Error: The group is not empty." in same(runs[4])

    done, listed = run_all(nodes.sides, [[*sg, "--describe", "--group", "sg-done"],
                                         [*sg, "--list"]])
    assert rows(same(done))[1] == ("sg-done", "jobs", "0", "0", "10")
    assert same(listed, sort=True).split() == ["sg-done", "sg-live"]


# --- kafka-transactions --------------------------------------------------------------


def clock_columns(text: str) -> str:
    """Wall-clock columns of kafka-transactions' tables (the coordinator's and the
    marker's times, which differ between two runs) as ``<t>``."""
    return epochs(text, "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                  token="<t>")


def test_kafka_transactions(nodes: Nodes) -> None:
    """list, describe (an open and a committed transaction), describe-producers and
    find-hanging (by broker, by topic with a timeout that makes the open one old)."""
    tx = ["kafka-transactions", "--bootstrap-server", "{bootstrap}"]
    listed, opened, done, producers, by_broker, by_topic = run_all(nodes.sides, [
        [*tx, "list"], [*tx, "describe", "--transactional-id", "tx-open"],
        [*tx, "describe", "--transactional-id", "tx-done"],
        [*tx, "describe-producers", "--topic", "payments", "--partition", "0"],
        [*tx, "find-hanging", "--broker-id", "1"],
        [*tx, "find-hanging", "--topic", "payments", "--max-transaction-timeout", "0"]])
    assert rows(same(listed, sort=True)) == [
        ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
        ("tx-done", "1", "0", "CompleteCommit"), ("tx-open", "1", "1", "Ongoing")]
    assert rows(same(opened, clock_columns))[1] == (
        "1", "tx-open", "1", "0", "Ongoing", "900000", "<t>", "<t>", "payments-0")
    assert rows(same(done, clock_columns))[1] == (
        "1", "tx-done", "0", "0", "CompleteCommit", "60000", "<t>", "<t>")
    marker_time = re.compile(r"^(0\s+0\s+0\s+0\s+)\d+", re.M)  # the commit marker's
    assert rows(same(producers, lambda t: marker_time.sub(r"\1<t>", t)))[1:] == [
        ("0", "0", "0", "0", "<t>", "None"), ("1", "0", "-1", "0", str(BASE_TS + 1000), "2")]
    header = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
              "StartOffset", "LastTimestamp", "Duration(min)")
    assert rows(same(by_broker)) == rows(same(by_topic)) == [header]


# --- the cluster: kafka-metadata-quorum, kafka-features, kafka-log-dirs, kafka-get-offsets


def quorum(text: str) -> str:
    """Metadata log offsets, fetch times and directory ids (each node's own) blanked."""
    return blank(re.sub(r'"directoryId": "[^"]+"', '"directoryId": "<dir>"', text),
                 r"(?<=HighWatermark:)\s+\d+", r"(?<=\t)[A-Za-z0-9_-]{22}(?=\t)",
                 r"(?<=\t)\d{3,}\s*(?=\t)")


def kafka_features_as_ottla(text: str) -> str:
    """Kafka's features as Ottla's have them (DIFFERENCES["features"])."""
    kept = [line for line in text.splitlines(keepends=True)
            if not re.match(r"Feature: streams\.version ", line)]
    assert len(kept) == len(text.splitlines()) - 1, text
    text, found = re.subn(r"(kraft\.version .*FinalizedVersionLevel: )1", r"\g<1>0",
                          "".join(kept))
    assert found, text
    return text


def test_kafka_metadata_quorum_features_log_dirs_and_get_offsets(nodes: Nodes) -> None:
    """The quorum's status and replication, the features, the log dirs' partitions and
    sizes (the same bytes stored, so the same sizes), and ListOffsets through
    kafka-get-offsets: latest, earliest (-2), max timestamp (-3) and by timestamp; an
    UpdateFeatures kafka-features refuses (a downgrade asked as an upgrade) alike."""
    status, replication, features, refused, log_dirs, latest, earliest, max_ts, by_time = \
        run_all(nodes.sides, [
            ["kafka-metadata-quorum", "--bootstrap-server", "{bootstrap}", "describe",
             "--status"],
            ["kafka-metadata-quorum", "--bootstrap-controller", "{controller}", "describe",
             "--replication"],
            ["kafka-features", "--bootstrap-server", "{bootstrap}", "describe"],
            ["kafka-features", "--bootstrap-server", "{bootstrap}", "upgrade", "--feature",
             "transaction.version=1"],
            ["kafka-log-dirs", "--bootstrap-server", "{bootstrap}", "--describe",
             "--topic-list", "dumped,orders,jobs"],
            ["kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "orders"],
            ["kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "orders",
             "--time", "-2"],
            ["kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic-partitions",
             "orders:1,dumped:0", "--time", "-3"],
            ["kafka-get-offsets", "--bootstrap-server", "{bootstrap}", "--topic", "orders",
             "--time", str(BASE_TS + 105_500)]])
    assert same(status, quorum).splitlines()[:3] == [
        "ClusterId:              <cluster-id>", "LeaderId:               1",
        "LeaderEpoch:            1"]
    assert rows(same(replication, quorum))[1] == (
        "1", "<t>", "<t>", "0", "<t>", "<t>", "Leader")
    text = same(features, lambda t: re.sub(r"Epoch: \d+", "Epoch: <n>", t),
                kafka=kafka_features_as_ottla)
    assert "Feature: transaction.version" in text
    assert failed_alike(refused) == (
        "Could not upgrade transaction.version to 1. The update failed for all features "
        "since the following feature had an error: Invalid update version 1 for feature "
        "transaction.version. Can't downgrade the version of this feature without setting "
        "the upgrade type to either safe or unsafe downgrade.\n")
    sizes = same(log_dirs)
    for partition, size in (("jobs-0", 181), ("orders-2", 271), ("dumped-0", 6750)):
        assert f'{{"partition":"{partition}","size":{size},' in sizes
    assert same(latest) == "orders:0:10\norders:1:10\norders:2:10\n"
    assert same(earliest) == "orders:0:0\norders:1:0\norders:2:0\n"
    assert same(max_ts, sort=True) == "dumped:0:12\norders:1:9"
    assert same(by_time) == "orders:1:6\norders:2:0\n"


# --- kafka-dump-log ------------------------------------------------------------------


def control_times(text: str) -> str:
    """A transaction marker's CreateTime and CRC (the coordinator's clock) as ``<t>``."""
    out = []
    for line in text.splitlines(keepends=True):
        if "isControl: true" in line or "endTxnMarker" in line:
            line = re.sub(r"(CreateTime|crc): \d+", r"\1: <t>", line)
        out.append(line)
    return "".join(out)


def test_kafka_dump_log_reads_ottla_segments_as_kafkas(nodes: Nodes) -> None:
    """kafka-dump-log over each broker's own segment files for the same record bytes:
    the .log (every codec, headers, null keys and values, a transaction and its marker),
    the .index and the .timeindex, read by Kafka's own code from Ottla's files."""
    files = "{data}/dumped-0/00000000000000000000"
    log, index, time_index, payments = run_all(nodes.sides, [
        ["kafka-dump-log", "--files", f"{files}.log", "--print-data-log"],
        ["kafka-dump-log", "--files", f"{files}.index"],
        ["kafka-dump-log", "--files", f"{files}.timeindex"],
        ["kafka-dump-log", "--files", "{data}/payments-0/00000000000000000000.log",
         "--print-data-log"]])
    text = same(log)
    assert text.count("baseOffset:") == len(DUMPED_BATCHES)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert f"compresscodec: {codec} " in text
    assert "headerKeys: [trace,tenant] key: alpha payload: one" in text
    assert text.count("| offset:") == 13
    assert same(index) == "Dumping <data>/dumped-0/00000000000000000000.index\n" \
                          "offset: 12 position: 6666\n"
    assert same(time_index) == "Dumping <data>/dumped-0/00000000000000000000.timeindex\n" \
                               f"timestamp: {BASE_TS + 60_000} offset: 12\n"
    text = same(payments, control_times)
    assert "endTxnMarker: COMMIT coordinatorEpoch: 0" in text
    assert "key: p2 payload: pending" in text



def test_kafka_dump_log_decodes_ottlas_metadata_log(nodes: Nodes) -> None:
    """kafka-dump-log --cluster-metadata-decoder reads Ottla's metadata log as Kafka's:
    every record framed as Kafka frames it (frame version 1), the topics it holds
    decoded by Kafka's own serde."""
    dumped, = run_all(nodes.sides, [[
        "kafka-dump-log", "--cluster-metadata-decoder", "--files",
        "{data}/__cluster_metadata-0/00000000000000000000.log"]])
    for side in ("ottla", "kafka"):
        text = dumped.out(side)
        assert "Could not deserialize" not in text and "Error" not in text, dumped.describe()
        assert '"type":"TOPIC_RECORD"' in text and '"name":"dumped"' in text, \
            dumped.describe()
        assert '"type":"FEATURE_LEVEL_RECORD"' in text, dumped.describe()


NUMBER = re.compile(r"\d+(\.\d+)?")


def test_kafka_perf_tools_and_end_to_end_latency(nodes: Nodes) -> None:
    """kafka-producer-perf-test (acks=all), then kafka-consumer-perf-test reading all it
    wrote, and kafka-e2e-latency (EndToEndLatency): each completes on both with the same
    report, its figures aside."""
    for side in nodes.sides:
        admin = AdminClient({"bootstrap.servers": side.bootstrap})
        for future in admin.create_topics([NewTopic("perf", 2, 1),
                                           NewTopic("latency", 1, 1)]).values():
            future.result(30)
    produced, = run_all(nodes.sides, [[
        "kafka-producer-perf-test", "--topic", "perf", "--num-records", "3000",
        "--record-size", "100", "--throughput", "-1", "--producer-props",
        "bootstrap.servers={bootstrap}", "acks=all"]])
    summary = [line for line in same(produced, lambda t: NUMBER.sub("<n>", t)).splitlines()
               if "records sent" in line]
    assert len(summary) == 1 and summary[0].startswith("<n> records sent"), produced.describe()
    assert all("3000 records sent" in produced.out(side) for side in ("ottla", "kafka"))
    consumed, latency = run_all(nodes.sides, [
        ["kafka-consumer-perf-test", "--bootstrap-server", "{bootstrap}", "--topic", "perf",
         "--num-records", "3000", "--timeout", "30000"],
        ["kafka-e2e-latency", "{bootstrap}", "latency", "200", "all", "100"]])
    ottla_csv, kafka_csv = ([[cell.strip() for cell in line.split(",")]
                             for line in consumed.out(side).splitlines() if "," in line]
                            for side in ("ottla", "kafka"))
    assert ottla_csv[0] == kafka_csv[0] and "data.consumed.in.nMsg" in ottla_csv[0], \
        consumed.describe()
    column = ottla_csv[0].index("data.consumed.in.nMsg")
    assert [r[column] for r in ottla_csv[1:]] == [r[column] for r in kafka_csv[1:]] == \
        ["3000"], consumed.describe()
    assert "Avg latency:" in same(latency, lambda t: NUMBER.sub("<n>", t))


def test_every_difference_is_in_the_compatibility_doc() -> None:
    """docs/compatibility.md's "Kafka's tools" lists each ``DIFFERENCES`` entry, so that
    what users are told and what the tests accept stay one list."""
    doc = (Path(__file__).parents[2] / "docs" / "compatibility.md").read_text()
    section = doc[doc.index("### Kafka's tools"):]
    listed = set(re.findall(r"^- `([a-z-]+)` \((?:bug|by design)\)", section, re.M))
    assert listed == set(DIFFERENCES)
    for key, difference in DIFFERENCES.items():
        assert f"`{key}` ({'bug' if difference.bug else 'by design'})" in section, key
