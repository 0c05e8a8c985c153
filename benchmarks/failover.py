"""A leader killed under Kafka's own verifiable producer, on Ottla and on Apache Kafka 4.4
configured alike: how long the partition is without a leader, how long its writes stall,
and what the producer and a consumer saw.

What Kafka's system tests do (ReplicationTest), timed: 1 controller + 3 brokers of each
system, a topic of ``--partitions`` partitions with 3 replicas and
``min.insync.replicas=2``; ``kafka-verifiable-producer`` (Kafka's Java producer, acks=-1,
idempotent) writes ``--rate`` records a second; after ``--before`` seconds the leader of
partition 0 is killed with SIGKILL; once the producer has sent ``--records`` the victim is
restarted and ``kafka-verifiable-consumer`` reads the topic in a group. Figures:

- *new leader after*: from the kill to the first Metadata answer naming another leader of
  partition 0 (the controller fences the dead broker after ``broker.session.timeout.ms``,
  9 s on both, unless it learns sooner);
- *partition 0 writes stall*: the longest gap between two acknowledgements of records of
  partition 0; and between two of any partition;
- acknowledged, failed (the producer gave up: a NetworkException as the leader died may
  lose those), acknowledged but not read (must be 0), read twice.

Each cluster runs ``--repeat`` rounds, a new topic each, and the medians are printed (one
kill is a sample of where the victim's last heartbeat fell in its 2 s interval). The
systems run one after the other, never side by side. Run:
``python -m benchmarks.failover [--rate 1000] [--records 20000] [--before 5] [--repeat 3]
[--no-kafka] [--json FILE]`` (Kafka's jars come from ``make kafka-ref``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers import KRaftCluster, wait_until
from tests.kafka_ref.cluster import KafkaCluster, broker_defaults, kafka_libs
from tests.kafka_ref.install import install
from tests.kafka_ref.verifiable import VerifiableClient

from benchmarks.vs_kafka import KAFKA_JVM_OPTS


class Broker(Protocol):
    """What the run does to a broker process of either system."""

    def kill9(self) -> None: ...


@dataclass
class System:
    name: str
    bootstrap: str
    broker: Callable[[int], Broker]
    restart: Callable[[int], None]


@contextmanager
def cluster(name: str, base: Path) -> Iterator[System]:
    """1 controller + 3 brokers of ``name``, stopped on the way out."""
    (base / name).mkdir()
    if name == "ottla":
        # The brokers' settings of Kafka's cluster (tests/kafka_ref), on Ottla's too.
        ottla = KRaftCluster(str(base / "ottla"), controllers=1, brokers=3,
                             broker_props=broker_defaults(3)).start()
        try:
            yield System(name, ottla.bootstrap, lambda i: ottla.nodes[i],
                         lambda i: ottla.nodes[i].start())
        finally:
            ottla.stop()
        return
    kafka = KafkaCluster(base / "kafka", controllers=1, brokers=3)
    for node in kafka.nodes.values():
        node.jvm_opts = KAFKA_JVM_OPTS
    kafka.start()
    try:
        yield System(name, kafka.bootstrap, lambda i: kafka.nodes[i],
                     lambda i: kafka.nodes[i].start())
    finally:
        kafka.stop(check=False)


def events(tool: str, *args: str) -> VerifiableClient:
    return VerifiableClient(kafka_libs(), tool, *args)


def leader(admin: AdminClient, topic: str, partition: int) -> int:
    meta = admin.list_topics(topic, timeout=5)
    return meta.topics[topic].partitions[partition].leader


def all_in_sync(admin: AdminClient, topic: str) -> bool:
    meta = admin.list_topics(topic, timeout=5)
    return all(len(p.isrs) == 3 for p in meta.topics[topic].partitions.values())


def run(system: System, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    """One round on a new topic: the kill, the victim restarted, the read, the figures."""
    admin = AdminClient({"bootstrap.servers": system.bootstrap})
    admin.create_topics([NewTopic(topic, args.partitions, 3,
                                  config={"min.insync.replicas": "2"})])[topic].result(60)
    wait_until(lambda: all_in_sync(admin, topic), 60, 0.2, "three in-sync replicas")
    producer = events("kafka-verifiable-producer", "--bootstrap-server", system.bootstrap,
                      "--topic", topic, "--max-messages", str(args.records),
                      "--throughput", str(args.rate), "--acks", "-1")
    try:
        wait_until(lambda: producer.named("producer_send_success"), 60, 0.05,
                   "the first acknowledgement")
        time.sleep(args.before)
        victim = leader(admin, topic, 0)
        killed_ms = time.time() * 1000
        system.broker(victim).kill9()
        wait_until(lambda: leader(admin, topic, 0) not in (victim, -1), 60, 0.05,
                   "another leader of partition 0")
        elected_ms = time.time() * 1000
        producer.proc.wait(args.records / args.rate + 180)
    finally:
        producer.stop()
    system.restart(victim)
    acks = producer.named("producer_send_success")
    acked = {str(e["value"]) for e in acks}
    failed = producer.named("producer_send_error")
    def longest_gap(partition: int | None) -> float:
        times = sorted(e["timestamp"] for e in acks
                       if partition is None or e["partition"] == partition)
        return max((b - a for a, b in itertools.pairwise(times)), default=0) / 1000

    consumer = events("kafka-verifiable-consumer", "--bootstrap-server", system.bootstrap,
                      "--topic", topic, "--group-id", f"verifiers-{topic}", "--verbose",
                      "--reset-policy", "earliest")
    started = time.monotonic()

    def read() -> list[str]:
        return [str(e["value"]) for e in consumer.named("record_data")]
    try:
        wait_until(lambda: acked <= set(read()), 180, 0.2, "every acknowledged record read")
        read_s = time.monotonic() - started
    finally:
        consumer.stop()
    values = read()
    wait_until(lambda: all_in_sync(admin, topic), 120, 0.5, "the victim back in sync")
    return {
        "new leader after (s)": round((elected_ms - killed_ms) / 1000, 2),
        "partition 0 writes stall (s)": round(longest_gap(0), 2),
        "longest gap between acks (s)": round(longest_gap(None), 2),
        "acknowledged": len(acked),
        "failed": len(failed),
        "failed with": dict(Counter(str(e.get("exception", "?")).rsplit(".", 1)[-1]
                                    for e in failed)),
        "acknowledged, not read": len(acked - set(values)),
        "read twice": len(values) - len(set(values)),
        "read back (s)": round(read_s, 2),
    }


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds; the errors summed."""
    out: dict[str, Any] = {}
    for key, first in rounds[0].items():
        if isinstance(first, dict):
            out[key] = dict(sum((Counter(r[key]) for r in rounds), Counter()))
        else:
            out[key] = statistics.median(r[key] for r in rounds)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="records a second")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--before", type=float, default=5.0,
                        help="seconds of writes before the kill")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds on each cluster (medians are printed)")
    parser.add_argument("--no-kafka", action="store_true", help="Ottla only")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    names = ["ottla"] if args.no_kafka else ["ottla", "kafka"]
    install()
    rounds: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="ottla-failover-") as tmp:
        for name in names:
            with cluster(name, Path(tmp)) as system:
                rounds[name] = [run(system, args, f"failover-{i}")
                                for i in range(args.repeat)]
    results = {name: median_round(r) for name, r in rounds.items()}
    keys = list(results["ottla"])
    print(f"{'':32} " + " ".join(f"{n:>10}" for n in names))
    for key in keys:
        print(f"{key:32} " + " ".join(f"{results[n][key]!s:>10}" for n in names))
    if len(names) == 2:
        print("ratio new leader after (Ottla / Kafka): "
              f"{results['ottla'][keys[0]] / max(results['kafka'][keys[0]], 0.01):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rounds, indent=2))


if __name__ == "__main__":
    main()
