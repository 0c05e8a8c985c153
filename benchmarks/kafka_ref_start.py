"""How long Apache Kafka 4.4 takes to start here and how much memory a node holds, beside the
same for an Ottla node in the same run: the figures docs/kafka-ref.md quotes, and the cost a
test pays for using Kafka as its oracle.

For each round: a combined Kafka node (format, then start until it serves; its RSS once
ready and after 10,000 records produced and consumed; its stop), the same for ``ottla
server``, and, with ``--cluster``, Kafka's 1 controller + 3 brokers. The first Kafka node of
a fresh install also writes the class-data archive (``cluster.NODE_ARCHIVE``) at its stop;
``--no-cds`` starts every node without one, to measure what the archive saves.

Run: ``python -m benchmarks.kafka_ref_start [--rounds 3] [--cluster] [--no-cds]``
(installs Kafka first if needed: ``make kafka-ref``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers import OttlaProcess
from tests.kafka_ref.cluster import KafkaCluster, single_node
from tests.kafka_ref.install import install

RECORDS = 10_000


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def exercise(bootstrap: str) -> None:
    """Produce and consume ``RECORDS`` records of 100 bytes through a 3-partition topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("bench", 3, 1)])["bench"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce("bench", value=b"x" * 100, key=str(i).encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["bench"])
    seen, deadline = 0, time.monotonic() + 120
    while seen < RECORDS and time.monotonic() < deadline:
        messages = consumer.consume(1000, 0.5)
        seen += sum(1 for m in messages if m.error() is None)
    consumer.close()
    assert seen >= RECORDS, seen


def timed(step: Callable[[], object]) -> float:
    start = time.monotonic()
    step()
    return time.monotonic() - start


def kafka_round(base: Path, cds: bool) -> dict[str, float]:
    cluster = single_node(base / "kafka")
    node = cluster.nodes[1]
    node.share_classes = cds
    result = {"format s": timed(cluster.format), "start s": timed(cluster.start)}
    assert node.pid is not None
    result["rss ready MiB"] = rss_of(node.pid) / 2**20
    exercise(cluster.bootstrap)
    result["rss after MiB"] = rss_of(node.pid) / 2**20
    result["stop s"] = timed(cluster.stop)
    return result


def ottla_round(base: Path) -> dict[str, float]:
    (base / "ottla").mkdir()
    node = OttlaProcess(str(base / "ottla" / "data"))
    result = {"format s": 0.0, "start s": timed(node.start)}
    assert node.proc is not None
    result["rss ready MiB"] = rss_of(node.proc.pid) / 2**20
    exercise(node.bootstrap)
    result["rss after MiB"] = rss_of(node.proc.pid) / 2**20
    result["stop s"] = timed(node.stop)
    return result


def cluster_round(base: Path, cds: bool) -> dict[str, float]:
    cluster = KafkaCluster(base / "kafka-cluster", controllers=1, brokers=3)
    for node in cluster.nodes.values():
        node.share_classes = cds
    result = {"format s": timed(cluster.format), "start s": timed(cluster.start)}
    result["rss ready MiB"] = sum(rss_of(n.pid) for n in cluster.nodes.values()
                                  if n.pid is not None) / 2**20
    result["stop s"] = timed(cluster.stop)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cluster", action="store_true", help="also 1 controller + 3 brokers")
    parser.add_argument("--no-cds", action="store_true", help="no class-data archive")
    args = parser.parse_args()
    print(f"install (finds or resolves the jars): {timed(install):.1f} s")
    runs: dict[str, list[dict[str, float]]] = {}
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kafka-ref-bench-") as base:
            runs.setdefault("kafka 1 node", []).append(kafka_round(Path(base), not args.no_cds))
            runs.setdefault("ottla 1 node", []).append(ottla_round(Path(base)))
            if args.cluster:
                runs.setdefault("kafka 1+3 (RSS: sum)", []).append(
                    cluster_round(Path(base), not args.no_cds))
        print(f"round {i + 1} done", flush=True)
    for name, results in runs.items():
        print(f"{name}: " + ", ".join(
            f"{key} {statistics.median(r[key] for r in results):.1f}"
            f" [{min(r[key] for r in results):.1f}-{max(r[key] for r in results):.1f}]"
            for key in results[0]))


if __name__ == "__main__":
    main()
