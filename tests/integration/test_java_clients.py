"""Kafka's own Java client (kafka-clients 4.4) against Ottla: KafkaProducer (idempotent by
default, acks=all, every codec, transactions), KafkaConsumer with both group protocols
(classic and KIP-848 consumer, a member joining under load), KafkaShareConsumer (implicit
and explicit acknowledgement, RELEASE and REJECT, redelivery after a consumer dies) and
Admin across the APIs Ottla serves, on one node and on a cluster of three brokers. The
Java client is the reference: what it accepts, Kafka's users accept."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.helpers import KRaftCluster, OttlaProcess, WireClient, wait_until
from tests.integration.test_share_consumers import set_group_config
from tests.integration.test_share_groups import FAST
from tests.java_clients import JavaClient, run, started
from tests.segments import CODEC_IDS, stored_codecs


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[OttlaProcess]:
    node = OttlaProcess(str(tmp_path_factory.mktemp("java-clients") / "data"),
                        overrides={**FAST, "group.share.min.record.lock.duration.ms": "1000",
                                   "group.consumer.heartbeat.interval.ms": "500",
                                   "group.consumer.min.heartbeat.interval.ms": "500"})
    node.start()
    try:
        yield node
    finally:
        node.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, rf: int = 1) -> None:
    result = run({"op": "admin", "bootstrap": bootstrap, "calls": [
        {"call": "create_topics", "topics": [
            {"name": topic, "partitions": partitions, "replication_factor": rf}]}]})
    assert result[0].get("value") == "ok", result


def produced(events: list[dict[str, Any]]) -> dict[str, Any]:
    (summary,) = [e for e in events if e["event"] == "produced"]
    return summary


def values(events: list[dict[str, Any]]) -> list[str]:
    return [e["value"] for e in events if e["event"] == "record"]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


# --- KafkaProducer ---------------------------------------------------------------------

@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_the_java_producer_writes_every_codec(node, codec) -> None:
    """Idempotent (the 4.x default) with acks=all: every record acknowledged once, the
    batches stored with the codec the producer chose, and read back by KafkaConsumer."""
    topic = unique(f"java-{codec}")
    create_topic(node.bootstrap, topic)
    summary = produced(run({"op": "produce", "bootstrap": node.bootstrap, "topic": topic,
                            "count": 500, "config": {"compression.type": codec, "acks": "all",
                                                      "linger.ms": "20"}}))
    assert summary["errors"] == [] and summary["acked"] == 500
    assert sorted(summary["offsets"]["0"]) == list(range(500))
    assert set(stored_codecs(node.data_dir, topic)) == {CODEC_IDS[codec]}
    read = run({"op": "consume", "bootstrap": node.bootstrap, "topics": [topic],
                "group": unique("g"), "count": 500, "timeout_ms": 30000})
    assert values(read) == [f"v{i}" for i in range(500)]


def test_java_transactions_commit_and_abort_for_a_read_committed_consumer(node) -> None:
    """Three transactions of 30 records, the second aborted: a read_committed KafkaConsumer
    gets the first and third only, in order; read_uncommitted gets all 90."""
    topic = unique("java-txn")
    create_topic(node.bootstrap, topic)
    summary = produced(run({
        "op": "produce", "bootstrap": node.bootstrap, "topic": topic, "count": 90,
        "transactions": 3, "abort": [1],
        "config": {"transactional.id": unique("tid"), "transaction.timeout.ms": "60000"}}))
    assert summary["errors"] == [] and summary["acked"] == 90
    committed = run({"op": "consume", "bootstrap": node.bootstrap, "topics": [topic],
                     "group": unique("g"), "count": 60, "timeout_ms": 30000,
                     "config": {"isolation.level": "read_committed"}})
    assert values(committed) == [f"v{i}" for i in [*range(30), *range(60, 90)]]
    everything = run({"op": "consume", "bootstrap": node.bootstrap, "topics": [topic],
                      "group": unique("g"), "count": 90, "timeout_ms": 30000,
                      "config": {"isolation.level": "read_uncommitted"}})
    assert sorted(values(everything), key=lambda v: int(v[1:])) == \
        [f"v{i}" for i in range(90)]


# --- KafkaConsumer ----------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_java_consumers_share_a_topic_while_records_flow(node, protocol) -> None:
    """A KafkaConsumer of a 4-partition topic, a second joining while records are
    produced: the partitions are split between them (a rebalance under load), no
    partition is owned by both at once, and every record is consumed."""
    topic, group, total = unique(f"java-{protocol}"), unique("g"), 4000
    create_topic(node.bootstrap, topic, partitions=4)
    consumer = {"op": "consume", "bootstrap": node.bootstrap, "topics": [topic],
                "group": group, "timeout_ms": 240_000,
                "config": {"group.protocol": protocol, "max.poll.records": "100"}}
    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        while sent[0] < total and not stop.is_set():
            producer.produce(topic, f"r{sent[0]}".encode(), partition=sent[0] % 4)
            sent[0] += 1
            if sent[0] % 100 == 0:
                producer.flush(10)
                stop.wait(0.01)
        producer.flush(30)
    writer = threading.Thread(target=produce)
    with started(consumer) as first:
        first.wait_for(lambda c: any(e["event"] == "assigned" and len(e["partitions"]) == 4
                                     for e in c.events), 60, "the first member's 4 partitions")
        writer.start()
        first.wait_for(lambda c: len(c.records()) >= 200, 60, "records before the join")
        with started(consumer) as second:
            def split(c: JavaClient) -> bool:
                owned = [_owned(first), _owned(second)]
                return all(owned) and not owned[0] & owned[1] and \
                    owned[0] | owned[1] == {f"{topic}-{p}" for p in range(4)}
            try:
                second.wait_for(split, 90, "the partitions split between two members")
            except AssertionError as e:
                first.drain()
                raise AssertionError(f"{e}\nfirst member: "
                                     f"{[x for x in first.events if x['event'] != 'record']} "
                                     f"ended {first.proc.poll()}\n{first.stderr()}") from e
            writer.join(60)
            assert sent[0] == total

            def all_consumed(c: JavaClient) -> bool:
                return {r["value"] for r in first.records() + second.records()} >= \
                    {f"r{i}" for i in range(total)}
            second.wait_for(all_consumed, 60, "every record consumed by one member or the "
                            "other")
    stop.set()


def _owned(client: JavaClient) -> set[str]:
    """The partitions a consumer owns now, from its assignment events (the classic
    protocol's eager assignor revokes all and assigns anew; KIP-848 adds and removes)."""
    client.drain()
    owned: set[str] = set()
    for event in client.events:
        if event["event"] == "assigned":
            owned |= set(event["partitions"])
        elif event["event"] == "revoked":
            owned -= set(event["partitions"])
    return owned


# --- KafkaShareConsumer -------------------------------------------------------------------

def share_consumer(node: OttlaProcess, group: str, topic: str, **extra: Any
                   ) -> dict[str, Any]:
    explicit = extra.pop("explicit", False)
    config = {"share.acknowledgement.mode": "explicit" if explicit else "implicit"}
    return {"op": "share-consume", "bootstrap": node.bootstrap, "topics": [topic],
            "group": group, "timeout_ms": 60000, "config": config, **extra}


def test_java_share_consumers_receive_every_record_once_implicitly(node) -> None:
    topic, group = unique("java-share"), unique("sg")
    create_topic(node.bootstrap, topic, partitions=2)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    produced(run({"op": "produce", "bootstrap": node.bootstrap, "topic": topic,
                  "count": 1000, "keyed": False}))
    with started(share_consumer(node, group, topic)) as a, \
            started(share_consumer(node, group, topic)) as b:
        a.wait_for(lambda c: len(a.records()) + len(b.records()) >= 1000, 60,
                   "1,000 records between two share consumers")
        got = a.records() + b.records()
    assert sorted(values(got), key=lambda v: int(v[1:])) == [f"v{i}" for i in range(1000)]
    assert {e["delivery_count"] for e in got} == {1}


def test_java_share_consumer_release_and_reject(node) -> None:
    """Explicit acknowledgement: RELEASEd records come back with delivery count 2 (then
    accepted), REJECTed ones never, ACCEPTed ones never."""
    topic, group = unique("java-share-ack"), unique("sg")
    create_topic(node.bootstrap, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    run({"op": "produce", "bootstrap": node.bootstrap, "topic": topic, "count": 30,
         "keyed": False})
    acks = {f"v{i}": "RELEASE" if i % 3 == 0 else "REJECT" if i % 3 == 1 else "ACCEPT"
            for i in range(30)}
    events = run(share_consumer(node, group, topic, explicit=True, acks=acks, count=40,
                                timeout_ms=60000))
    deliveries: dict[str, list[int]] = {}
    for e in events:
        if e["event"] == "record":
            deliveries.setdefault(e["value"], []).append(e["delivery_count"])
    assert deliveries == {f"v{i}": [1, 2] if i % 3 == 0 else [1] for i in range(30)}


def test_records_of_a_java_share_consumer_that_dies_go_to_another(node) -> None:
    """A KafkaShareConsumer halted (no close) while holding records: its connection
    closes, and another member receives them with delivery count 2."""
    topic, group = unique("java-share-dies"), unique("sg")
    create_topic(node.bootstrap, topic)
    set_group_config(node, group, "share.auto.offset.reset", "earliest")
    run({"op": "produce", "bootstrap": node.bootstrap, "topic": topic, "count": 10,
         "keyed": False, "config": {"linger.ms": "50"}})
    holder = run(share_consumer(node, group, topic, explicit=True, die_after=1), check=False)
    held = [e for e in holder if e["event"] == "record"]
    assert len(held) == 1 and holder[-1]["event"] == "record", holder  # halted holding
    with started(share_consumer(node, group, topic)) as other:
        other.wait_for(lambda c: {r["value"] for r in c.records()} >=
                       {f"v{i}" for i in range(10)}, 60, "every record at the other member")
        counts = {r["value"]: r["delivery_count"] for r in other.records()}
    assert counts[held[0]["value"]] == 2


# --- Admin ---------------------------------------------------------------------------------

def test_java_admin_across_the_apis(node) -> None:
    """Admin on one node: topics, partitions, configs (topic, broker, group), cluster,
    log dirs, offsets, records, groups and their offsets, producers, transactions,
    features, the quorum. Each answer is what a Kafka user's tooling expects."""
    topic, group = unique("java-admin"), unique("admin-g")
    b = node.bootstrap
    create_topic(b, topic, partitions=2)
    run({"op": "produce", "bootstrap": b, "topic": topic, "count": 20, "partition": 0,
         "config": {"transactional.id": unique("admin-tid")}})
    run({"op": "consume", "bootstrap": b, "topics": [topic], "group": group, "count": 20,
         "timeout_ms": 30000})
    calls = [
        {"call": "list_topics"},
        {"call": "describe_topics", "topics": [topic]},
        {"call": "create_partitions", "topic": topic, "total": 3},
        {"call": "describe_topics", "topics": [topic]},
        {"call": "incremental_alter_configs", "type": "TOPIC", "name": topic,
         "ops": [{"name": "retention.ms", "value": "3600000"}]},
        {"call": "describe_configs", "type": "TOPIC", "name": topic},
        {"call": "describe_configs", "type": "BROKER", "name": "1"},
        {"call": "incremental_alter_configs", "type": "GROUP", "name": group,
         "ops": [{"name": "consumer.session.timeout.ms", "value": "50000"}]},
        {"call": "describe_configs", "type": "GROUP", "name": group},
        {"call": "describe_cluster"},
        {"call": "describe_log_dirs", "brokers": [1]},
        {"call": "list_offsets", "topic": topic, "partition": 0, "spec": "latest"},
        {"call": "list_offsets", "topic": topic, "partition": 0, "spec": "earliest"},
        {"call": "list_groups"},
        {"call": "describe_consumer_groups", "groups": [group]},
        {"call": "list_offsets_of_group", "group": group},
        {"call": "alter_offsets_of_group", "group": group,
         "offsets": [{"topic": topic, "partition": 0, "offset": 5}]},
        {"call": "list_offsets_of_group", "group": group},
        {"call": "delete_offsets_of_group", "group": group,
         "partitions": [{"topic": topic, "partition": 0}]},
        {"call": "list_offsets_of_group", "group": group},
        {"call": "describe_producers", "topic": topic, "partition": 0},
        {"call": "list_transactions"},
        {"call": "describe_features"},
        {"call": "describe_quorum"},
        {"call": "delete_records", "topic": topic, "partition": 0, "before": 4},
        {"call": "list_offsets", "topic": topic, "partition": 0, "spec": "earliest"},
        {"call": "delete_groups", "groups": [group]},
        {"call": "delete_topics", "topics": [topic]},
    ]
    results = [e for e in run({"op": "admin", "bootstrap": b, "calls": calls},
                              timeout=180) if e["event"] == "result"]
    answers = [r.get("value", r.get("error")) for r in results]
    errors = [(c["call"], r) for c, r in zip(calls, results, strict=True) if "error" in r]
    assert errors == [], errors
    (listed, before, _, after, _, topic_cfg, broker_cfg, _, group_cfg, cluster, dirs, latest,
     earliest, groups, described, offsets, _, altered, _, deleted, producers, txns, features,
     quorum, low, earliest_after, _, _) = answers
    assert topic in listed
    assert len(before[topic]["partitions"]) == 2 and len(after[topic]["partitions"]) == 3
    assert topic_cfg["retention.ms"]["value"] == "3600000"
    assert topic_cfg["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert broker_cfg["num.partitions"]["source"] in ("STATIC_BROKER_CONFIG",
                                                      "DEFAULT_CONFIG")
    assert group_cfg["consumer.session.timeout.ms"]["value"] == "50000"
    assert [n["id"] for n in cluster["nodes"]] == [1] and cluster["controller"] >= 0
    assert any(f"{topic}-0" in d["replicas"] for d in dirs["1"].values())
    assert (latest, earliest) == (21, 0)  # 20 records and the commit marker
    (listing,) = [g for g in groups if g["group"] == group]
    # The Java consumer's default group.protocol is classic.
    assert (listing["type"].lower(), listing["state"].lower()) == ("classic", "empty")
    assert described[group]["state"].lower() == "empty"
    assert offsets[f"{topic}-0"] == 21 and altered[f"{topic}-0"] == 5
    assert f"{topic}-0" not in deleted
    # Transactions v2: the COMMIT marker carries the epoch EndTxn bumped, and a new epoch
    # clears the producer's batch metadata (Kafka's ProducerStateEntry
    # .maybeUpdateProducerEpoch), so no last sequence is left to show.
    assert [(p["epoch"], p["last_sequence"]) for p in producers] == [(1, -1)]
    assert any(t["state"] == "CompleteCommit" for t in txns)
    assert features["finalized"]["metadata.version"] > 0
    assert quorum["leader"] == 1 and quorum["voters"] == [1]
    assert low == 4 and earliest_after == 4


# --- a cluster of three brokers -------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[KRaftCluster]:
    c = KRaftCluster(str(tmp_path_factory.mktemp("java-cluster")), controllers=1,
                     brokers=3, broker_props={"transaction.state.log.replication.factor": "3",
                                              "transaction.state.log.min.isr": "2",
                                              "offsets.topic.replication.factor": "3"}).start()
    try:
        yield c
    finally:
        c.stop()


def test_java_clients_on_a_replicated_cluster(cluster) -> None:
    """RF 3 with min.insync.replicas=2: an idempotent acks=all producer and a
    transactional one, a KafkaConsumer reading both back, Admin describing the replicas,
    moving one (reassignment) and electing the preferred leaders."""
    b = cluster.bootstrap
    topic = unique("java-rf3")
    results = run({"op": "admin", "bootstrap": b, "calls": [
        {"call": "create_topics", "topics": [{"name": topic, "partitions": 3,
                                              "replication_factor": 3,
                                              "configs": {"min.insync.replicas": "2"}}]}]})
    assert results[0]["value"] == "ok", results
    plain = produced(run({"op": "produce", "bootstrap": b, "topic": topic, "count": 300,
                          "config": {"acks": "all"}}))
    txn = produced(run({"op": "produce", "bootstrap": b, "topic": topic, "count": 60,
                        "prefix": "t", "transactions": 2,
                        "config": {"transactional.id": unique("rf3-tid")}}))
    assert plain["errors"] == txn["errors"] == []
    read = run({"op": "consume", "bootstrap": b, "topics": [topic], "group": unique("g"),
                "count": 360, "timeout_ms": 60000,
                "config": {"isolation.level": "read_committed"}})
    assert sorted(values(read)) == sorted([f"v{i}" for i in range(300)] +
                                          [f"t{i}" for i in range(60)])

    def described() -> dict[str, Any]:
        answer = run({"op": "admin", "bootstrap": b, "calls": [
            {"call": "describe_topics", "topics": [topic]}]})
        return {p["partition"]: p for p in answer[0]["value"][topic]["partitions"]}
    partitions = described()
    assert all(len(p["replicas"]) == 3 and sorted(p["isr"]) == sorted(p["replicas"])
               for p in partitions.values())
    replicas = partitions[0]["replicas"]
    rotated = replicas[1:] + replicas[:1]
    moved = run({"op": "admin", "bootstrap": b, "calls": [
        {"call": "reassign", "moves": [{"topic": topic, "partition": 0,
                                        "replicas": rotated}]}]})
    assert moved[0].get("value") == "ok", moved
    wait_until(lambda: described()[0]["replicas"] == rotated, 60,
               message=lambda: f"partition 0 replicas {described()[0]}")
    elected = run({"op": "admin", "bootstrap": b, "calls": [
        {"call": "elect_leaders", "type": "PREFERRED",
         "partitions": [{"topic": topic, "partition": 0}]}]})
    assert elected[0]["value"][f"{topic}-0"] in ("ok", "ElectionNotNeededException")
    wait_until(lambda: described()[0]["leader"] == rotated[0], 60,
               message=lambda: f"the preferred leader of partition 0: {described()[0]}")
    with WireClient(cluster.broker().bootstrap) as client:
        assert client.api_versions().error_code == 0
