"""What replication costs: ``acks=all`` produce to a topic with three replicas on three
broker processes, beside the same to one replica, and the sink (the network layer
storing nothing) measured in the same run; and the acknowledgement latency of
``acks=all`` at a fixed rate for one and three replicas, whose difference is the
replication lag (from the leader's append to the high watermark passing it: the
followers' fetch, their append, and the fetch that reports it).

Run: ``python -m benchmarks.replication`` (``--size 1024 --seconds 5 --rate 5000``).
All processes share this machine's cores, so three brokers compete with the client
and with each other: the figures say what replication costs here, not on three hosts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers import KRaftCluster, wait_until

from benchmarks.throughput import MB, PRODUCER, paced, percentile_ms, produce, start_sinks


def ack_latency(bootstrap: str, topic: str, size: int, rate: float, seconds: float
                ) -> dict[str, float]:
    """Produce at ``rate`` records/s with ``acks=all``; the time from ``produce`` to each
    acknowledgement, p50 and p99 in ms."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1})
    delays: list[float] = []
    lock = threading.Lock()

    def acked(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                delays.append(time.perf_counter() - float(msg.value()[:20]))
    pad = b"p" * max(0, size - 20)
    for _ in paced(rate, seconds):
        producer.produce(topic, f"{time.perf_counter():20.6f}".encode() + pad, partition=0,
                         on_delivery=acked)
        producer.poll(0)
    producer.flush(60)
    return {"records": len(delays), "p50_ms": percentile_ms(delays, 0.5),
            "p99_ms": percentile_ms(delays, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=5000.0,
                        help="records/s for the latency measurement")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for all three brokers (repeatable)")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="ottla-replication-bench-")
    cluster = KRaftCluster(workdir, controllers=1, brokers=3, broker_props=dict(
        item.split("=", 1) for item in args.broker_config))
    sinks: list[Any] = []
    try:
        sinks, sink, _ = start_sinks(args.size, os.path.join(workdir, "sink-store"))
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [NewTopic("rf1", 1, 1), NewTopic("rf3", 1, 3,
                                                   config={"min.insync.replicas": "2"})]
        for future in admin.create_topics(topics).values():
            future.result(30)
        wait_until(lambda: all(
            len(t.partitions[0].isrs) == len(t.partitions[0].replicas)
            for t in admin.list_topics(timeout=5).topics.values() if t.topic in ("rf1", "rf3")),
            30, 0.2, "every replica in sync")
        results = {
            "sink": produce(sink, "sink", args.size, args.seconds, "all"),
            "rf1": produce(cluster.bootstrap, "rf1", args.size, args.seconds, "all"),
            "rf3": produce(cluster.bootstrap, "rf3", args.size, args.seconds, "all"),
        }
        latencies = {name: ack_latency(cluster.bootstrap, name, args.size, args.rate,
                                       args.seconds) for name in ("rf1", "rf3")}
    finally:
        for s in sinks:
            s.terminate()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    sink_mb = results["sink"]["mb_per_s"]
    print(f"{args.size} B records, acks=all, batch.size {PRODUCER['batch.size'] // MB} MiB, "
          f"{args.seconds:g} s each; 1 controller + 3 brokers on {os.cpu_count()} cores; "
          f"broker settings: {', '.join(args.broker_config) or 'defaults'}")
    print("| topic | records/s | MB/s | ratio to the sink | ratio to RF 1 |")
    print("|---|---|---|---|---|")
    for name in ("sink", "rf1", "rf3"):
        r = results[name]
        print(f"| {name} | {r['records_per_s']:,.0f} | {r['mb_per_s']:.1f} | "
              f"{r['mb_per_s'] / sink_mb:.2f} | "
              f"{r['mb_per_s'] / results['rf1']['mb_per_s']:.2f} |")
    print(f"\nacks=all acknowledgement latency at {args.rate:,.0f} records/s:")
    for name, lat in latencies.items():
        print(f"  {name}: p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms "
              f"({lat['records']} records)")
    print(f"  replication lag (RF 3 - RF 1): p50 "
          f"{latencies['rf3']['p50_ms'] - latencies['rf1']['p50_ms']:.1f} ms, p99 "
          f"{latencies['rf3']['p99_ms'] - latencies['rf1']['p99_ms']:.1f} ms")


if __name__ == "__main__":
    main()
