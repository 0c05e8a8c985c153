"""Ottla beside Apache Kafka 4.4 on this machine, in one run, with the same client
(confluent-kafka), the same settings and the same topic layout: each figure is printed
with Kafka's and their ratio.

Workloads, each against one ``ottla server`` and then one combined Kafka node (Kafka's
quickstart; its JVM with ``kafka-server-start.sh``'s heap and GC settings), started fresh
for the run, the other stopped meanwhile so that the two never share the cores:

- produce for ``--seconds`` at 100 B, 1 KiB and 16 KiB, ``acks=1`` and ``acks=all``, to
  one partition and round-robin over eight (``benchmarks.throughput.produce``);
- consume from the beginning of the one-partition ``acks=1`` topic;
- end-to-end latency (p50, p99, p99.9) at fixed rates, 1 KiB at 20,000 records/s among
  them (``benchmarks.throughput.latency``);
- transactions of 100 and of 10,000 records (``benchmarks.transactions.run``);
- a consumer group of 10 members from subscribe to every partition owned once, with the
  classic and the consumer (KIP-848) protocols (several rounds, a new group each: their
  median and the worst);
- share-group consume: one ShareConsumer reading records produced before it started;
- (after 10 s of produce and consume that warm both up, Kafka's JIT above all)
- the broker's CPU seconds per GB moved in the produce and consume phases, and its peak
  RSS (``VmHWM``);
- with ``--cluster``, produce with ``acks=all`` to a topic of 3 replicas
  (``min.insync.replicas=2``) on 1 controller + 3 brokers of each.

Ratios are Ottla / Kafka: above 1 is Ottla ahead for rates, behind for times and costs
(the table says which). Two cores are shared by the client and the broker, so compare
ratios of one run, not figures across runs (docs/performance.md).

Run: ``python -m benchmarks.vs_kafka [--quick] [--seconds 5] [--cluster] [--json FILE]
[--only throughput latency transactions groups share]``
(installs Kafka first if needed: ``make kafka-ref``). ``--quick`` is one size (1 KiB),
one rate and 3-second phases: a few minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from tests.helpers import KRaftCluster, OttlaProcess, wait_until
from tests.kafka_ref.cluster import KafkaCluster, single_node
from tests.kafka_ref.install import install

from benchmarks import transactions
from benchmarks.throughput import (
    PRODUCER,
    consume,
    latency,
    proc_cpu_seconds,
    proc_peak_rss_mb,
    produce,
)

MB = 1 << 20
KAFKA_JVM_OPTS: tuple[str, ...] = (
    # kafka-server-start.sh's heap and kafka-run-class.sh's GC settings: Kafka as shipped.
    "-Xms1g", "-Xmx1g",
    "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
)
GROUP_MEMBERS = 10
GROUP_PARTITIONS = 100
SHARE_RECORDS = 100_000
WARM_UP_SECONDS = 10.0
HIGHER_IS_BETTER = "rate"
LOWER_IS_BETTER = "time"


@dataclass(frozen=True)
class Node:
    """A system under test while it runs: where clients connect, the broker process whose
    CPU and memory are counted."""

    name: str
    bootstrap: str
    pid: int


@contextmanager
def ottla_node(base: Path) -> Iterator[Node]:
    node = OttlaProcess(str(base / "ottla" / "data"))
    (base / "ottla").mkdir(parents=True, exist_ok=True)
    node.start()
    try:
        assert node.proc is not None
        yield Node("ottla", node.bootstrap, node.proc.pid)
    finally:
        node.stop()


@contextmanager
def kafka_node(base: Path) -> Iterator[Node]:
    cluster = single_node(base / "kafka")
    node = cluster.nodes[1]
    node.jvm_opts = KAFKA_JVM_OPTS
    cluster.start()
    try:
        assert node.pid is not None
        yield Node("kafka", cluster.bootstrap, node.pid)
    finally:
        cluster.stop()


def create_topics(bootstrap: str, partitions: int, *names: str, replicas: int = 1,
                  config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, replicas, config=config or {})
                                   for n in names], operation_timeout=30)
    for future in futures.values():
        future.result(60)
    # Both systems answer CreateTopics before every metadata cache has the topic.
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        wait_until(lambda: all(
            n in (md := probe.list_topics(timeout=10)).topics
            and len(md.topics[n].partitions) == partitions
            and all(p.leader >= 0 for p in md.topics[n].partitions.values())
            for n in names), 60, 0.1, f"topics {names} with leaders")
    finally:
        probe.close()


# --- workloads ------------------------------------------------------------------------------

def throughput(node: Node, sizes: list[int], seconds: float) -> dict[str, Any]:
    """Produce (acks 1/all, 1/8 partitions) and consume per size, and the broker's CPU per
    GB moved over all of it."""
    out: dict[str, Any] = {}
    cpu0, moved = proc_cpu_seconds(node.pid), 0
    for size in sizes:
        for partitions in (1, 8):
            for acks in ("1", "all"):
                topic = f"produce-{size}-{partitions}-{acks}"
                create_topics(node.bootstrap, partitions, topic)
                r = produce(node.bootstrap, topic, size, seconds, acks, partitions)
                out[f"produce {size} B acks={acks} {partitions}p MB/s"] = r["mb_per_s"]
                moved += r["records"] * size
                if partitions == 1 and acks == "1":
                    c = consume(node.bootstrap, topic, size, r["records"])
                    out[f"consume {size} B MB/s"] = c["mb_per_s"]
                    moved += c["records"] * size
    out["broker CPU s per GB"] = (proc_cpu_seconds(node.pid) - cpu0) / max(moved / 2**30, 1e-9)
    return out


def latencies(node: Node, rates: list[tuple[int, int]], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size, rate in rates:
        topic = f"latency-{size}-{rate}"
        create_topics(node.bootstrap, 1, topic)
        r = latency(node.bootstrap, topic, size, rate, seconds)
        for p in ("p50", "p99", "p999"):
            out[f"latency {size} B at {rate}/s {p} ms"] = r[f"{p}_ms"]
        out[f"latency {size} B at {rate}/s steal ms"] = r["steal_ms"]
    return out


def transactional(node: Node, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for per_txn in (100, 10_000):
        topic = f"txn-{per_txn}"
        create_topics(node.bootstrap, 1, topic)
        r = transactions.run(node.bootstrap, topic, 1024, 1, seconds, per_txn, min_commits=3)
        out[f"transactions of {per_txn} x 1 KiB MB/s"] = r["mb_per_s"]
        out[f"transactions of {per_txn}: commit p50 ms"] = r["commit_p50_ms"]
    return out


def group_stable_seconds(bootstrap: str, topic: str, protocol: str, group: str) -> float:
    """From the first subscribe until every partition is owned by exactly one of
    ``GROUP_MEMBERS`` consumers."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                            "group.protocol": protocol}
    if protocol == "classic":
        conf["partition.assignment.strategy"] = "cooperative-sticky"
    owned: dict[int, set[int]] = {}
    consumers = []
    start = time.monotonic()
    for i in range(GROUP_MEMBERS):
        consumer = Consumer(conf)

        def on_assign(_c: Any, parts: Any, i: int = i) -> None:
            owned.setdefault(i, set()).update(p.partition for p in parts)

        def on_revoke(_c: Any, parts: Any, i: int = i) -> None:
            owned.setdefault(i, set()).difference_update(p.partition for p in parts)
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        consumers.append(consumer)

    def stable() -> bool:
        for consumer in consumers:
            consumer.poll(0)
        total = sum(len(p) for p in owned.values())
        union = set().union(*owned.values()) if owned else set()
        return len(owned) == GROUP_MEMBERS and all(owned.values()) and \
            total == GROUP_PARTITIONS == len(union)
    try:
        wait_until(stable, 300, 0.01, f"{GROUP_MEMBERS} {protocol} members owning "
                                      f"{GROUP_PARTITIONS} partitions")
        return time.monotonic() - start
    finally:
        for consumer in consumers:
            consumer.close()


def groups(node: Node, rounds: int) -> dict[str, Any]:
    """Each protocol's time to a stable group of ``GROUP_MEMBERS``, ``rounds`` times with a
    new group each: one sample says little, since both systems race the same way.

    A classic group forms in one generation (0.1-0.2 s) if its first join completes after
    the last member has arrived; else members rejoin after SyncGroup's
    REBALANCE_IN_PROGRESS (librdkafka sends it 1.9 s later: about 2 s in all), or wait
    twice for a heartbeat (``heartbeat.interval.ms``, 3 s: about 6 s). Which one happens
    is decided by microseconds on both systems, so the median and the worst round are
    printed (docs/performance.md)."""
    create_topics(node.bootstrap, GROUP_PARTITIONS, "group-bench")
    out: dict[str, Any] = {}
    for protocol in ("classic", "consumer"):
        took = [group_stable_seconds(node.bootstrap, "group-bench", protocol, f"g-{protocol}-{r}")
                for r in range(rounds)]
        print(f"  {node.name}: {protocol} group rounds (s): "
              + ", ".join(f"{t:.2f}" for t in took), flush=True)
        out[f"group of {GROUP_MEMBERS} stable ({protocol}) s, median of {rounds}"] = \
            statistics.median(took)
        out[f"group of {GROUP_MEMBERS} stable ({protocol}) s, worst of {rounds}"] = max(took)
    return out


def share_consume(node: Node) -> dict[str, Any]:
    """One ShareConsumer (implicit acknowledgement) reads ``SHARE_RECORDS`` 1 KiB records
    written before it joined (``share.auto.offset.reset=earliest`` on the group)."""
    topic, group = "share-bench", "share-bench"
    create_topics(node.bootstrap, 1, topic)
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "1", **PRODUCER})
    for _ in range(SHARE_RECORDS):
        while True:
            try:
                producer.produce(topic, b"x" * 1024, partition=0)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(120) == 0
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest",
        incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    consumer.subscribe([topic])
    got, first = 0, None
    deadline = time.monotonic() + 300
    try:
        while got < SHARE_RECORDS and time.monotonic() < deadline:
            for message in consumer.poll(0.5) or []:
                if message.error() is None:
                    first = first or time.perf_counter()
                    got += 1
        took = time.perf_counter() - (first or time.perf_counter())
    finally:
        consumer.close()
    if got < SHARE_RECORDS:
        raise RuntimeError(f"share consumer read {got} of {SHARE_RECORDS} in 300 s")
    return {"share consume 1 KiB records/s": got / max(took, 1e-9)}


def replicated(name: str, base: Path, seconds: float) -> dict[str, Any]:
    """acks=all produce of 1 KiB records to 3 replicas (min ISR 2) on 1 controller + 3
    brokers."""
    config = {"min.insync.replicas": "2"}
    if name == "ottla":
        cluster = KRaftCluster(str(base / "ottla-cluster"), controllers=1, brokers=3).start()
        stop: Callable[[], object] = cluster.stop
        bootstrap = cluster.bootstrap
    else:
        kafka = KafkaCluster(base / "kafka-cluster", controllers=1, brokers=3)
        for node in kafka.nodes.values():
            node.jvm_opts = KAFKA_JVM_OPTS
        kafka.start()
        stop, bootstrap = kafka.stop, kafka.bootstrap
    try:
        create_topics(bootstrap, 1, "rf3", replicas=3, config=config)
        r = produce(bootstrap, "rf3", 1024, seconds, "all")
        return {"RF 3 produce 1 KiB acks=all MB/s": r["mb_per_s"]}
    finally:
        stop()


# --- the run ------------------------------------------------------------------------------

def warm_up(node: Node, seconds: float = WARM_UP_SECONDS) -> None:
    """Produce and consume 1 KiB records for a while before measuring: Kafka's JIT
    compiles its hot paths in the first seconds, and a cold JVM is not what its users
    run (Ottla gets the same, so the two are measured alike)."""
    create_topics(node.bootstrap, 1, "warm-up")
    done = produce(node.bootstrap, "warm-up", 1024, seconds, "1")
    consume(node.bootstrap, "warm-up", 1024, done["records"])


def run_system(name: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    start = ottla_node if name == "ottla" else kafka_node
    sizes = [1024] if args.quick else [100, 1024, 16384]
    rates = [(1024, 20_000)] if args.quick else [(100, 20_000), (1024, 5_000),
                                                 (1024, 20_000), (16384, 2_000)]
    rounds = 3 if args.quick else 5
    phases: dict[str, Callable[[Node], dict[str, Any]]] = {
        "throughput": lambda node: throughput(node, sizes, args.seconds),
        "latency": lambda node: latencies(node, rates, args.seconds),
        "transactions": lambda node: transactional(node, args.seconds),
        "groups": lambda node: groups(node, rounds),
        "share": share_consume,
    }
    results: dict[str, Any] = {}
    with start(base / name) as node:
        warm_up(node)
        for phase, measure in phases.items():
            if args.only and phase not in args.only:
                continue
            results.update(measure(node))
            print(f"  {name}: {len(results)} figures", flush=True)
        results["broker peak RSS MiB"] = proc_peak_rss_mb(node.pid)
    if args.cluster:
        results.update(replicated(name, base / name, args.seconds))
    return results


def better(key: str) -> str:
    return LOWER_IS_BETTER if any(word in key for word in (" ms", " s", "CPU", "RSS")) \
        and "MB/s" not in key and "records/s" not in key else HIGHER_IS_BETTER


def table(ottla: dict[str, Any], kafka: dict[str, Any]) -> str:
    lines = ["| workload | Ottla | Kafka 4.4 | Ottla / Kafka | better |",
             "|---|---:|---:|---:|---|"]
    for key, value in ottla.items():
        other = kafka.get(key)
        ratio = f"{value / other:.2f}" if other else "-"
        lines.append(f"| {key} | {value:,.1f} | "
                     f"{'-' if other is None else f'{other:,.1f}'} | {ratio} | "
                     f"{'lower' if better(key) == LOWER_IS_BETTER else 'higher'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 KiB only, one rate, 3 s")
    parser.add_argument("--seconds", type=float, default=None,
                        help="length of each produce and latency phase (5; 3 with --quick)")
    parser.add_argument("--cluster", action="store_true",
                        help="also RF 3 on 1 controller + 3 brokers of each")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--only", nargs="+", metavar="PHASE",
                        choices=("throughput", "latency", "transactions", "groups", "share"),
                        help="run only these single-node phases (all by default)")
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 3.0 if args.quick else 5.0
    install()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="vs-kafka-") as tmp:
        for name in ("ottla", "kafka"):
            print(f"{name} ...", flush=True)
            results[name] = run_system(name, Path(tmp), args)
    report = {"machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())},
              "seconds": args.seconds, **results}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    print(table(results["ottla"], results["kafka"]))


if __name__ == "__main__":
    main()
