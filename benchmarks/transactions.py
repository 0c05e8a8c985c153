"""What transactions cost: transactional produce (transactions of 100 and of 10,000
records: begin, produce, commit in a loop) beside idempotent produce (``acks=all``,
``enable.idempotence=true``) to the same node in the same run, which is the ceiling;
and the latency of ``commit_transaction`` for transactions of 100 records.

Each transaction's records are flushed (all acknowledged) before ``commit_transaction``
is timed, so the commit latency is the commit alone: librdkafka's EndTxn round trip to
the coordinator, which answers once its PrepareCommit is in ``__transaction_state``;
the markers on each partition and the CompleteCommit record follow after the answer,
and the next transaction's AddPartitionsToTxn waits for them (CONCURRENT_TRANSACTIONS,
retried by the client): that wait shows in the "begin to acked" time.

Run: ``python -m benchmarks.transactions`` (``--size 1024 --seconds 5 --partitions 1
--min-commits 300 --json FILE``). One node, started here, shares the machine's cores
with the client. Where the broker's time goes: ``py-spy record --idle -p <pid>`` of the
``ottla server`` child during a phase (docs/performance.md, "Transactions").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.helpers import OttlaProcess

from benchmarks.throughput import MB, PRODUCER, percentile_ms


def run(bootstrap: str, topic: str, size: int, partitions: int, seconds: float,
        per_txn: int | None, min_commits: int = 0) -> dict[str, Any]:
    """Produce ``size``-byte records round-robin over ``partitions`` for ``seconds`` (and at
    least ``min_commits`` transactions): idempotent when ``per_txn`` is None, otherwise in
    transactions of ``per_txn`` records. Records/s, MB/s and, per transaction, the time
    from begin to every record acknowledged and the time of the commit."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all",
                              "enable.idempotence": True, **PRODUCER}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    value = b"x" * size
    sent = 0

    def send(n: int) -> None:
        nonlocal sent
        for i in range(n):
            while True:
                try:
                    producer.produce(topic, value, partition=(sent + i) % partitions,
                                     on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.001)
            if i % 1000 == 999:
                producer.poll(0)
        sent += n

    acked: list[float] = []
    commits: list[float] = []
    if per_txn is not None:
        producer.init_transactions(30)
    start = time.perf_counter()
    if per_txn is None:
        while time.perf_counter() - start < seconds:
            send(1000)
            producer.poll(0)
        producer.flush(120)
    else:
        while time.perf_counter() - start < seconds or len(commits) < min_commits:
            began = time.perf_counter()
            producer.begin_transaction()
            send(per_txn)
            producer.flush(120)
            flushed = time.perf_counter()
            producer.commit_transaction(60)
            acked.append(flushed - began)
            commits.append(time.perf_counter() - flushed)
    took = time.perf_counter() - start
    producer.close()
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    r: dict[str, Any] = {"records": sent, "seconds": took, "records_per_s": sent / took,
                         "mb_per_s": sent * size / took / MB}
    if commits:
        r.update(transactions=len(commits), txn_per_s=len(commits) / took,
                 commit_share=sum(commits) / took,
                 acked_p50_ms=percentile_ms(acked, 0.5), acked_p99_ms=percentile_ms(acked, 0.99),
                 commit_p50_ms=percentile_ms(commits, 0.5),
                 commit_p99_ms=percentile_ms(commits, 0.99),
                 commit_max_ms=max(commits) * 1000)
    return r


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)
                                       for name in names]).values():
        future.result(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of each topic, written round-robin (a commit "
                             "writes one marker to each)")
    parser.add_argument("--min-commits", type=int, default=300,
                        help="the 100-record phase runs until it has this many commits")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker setting for the node (repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    broker_config = dict(item.split("=", 1) for item in args.broker_config)
    workdir = tempfile.mkdtemp(prefix="ottla-transactions-bench-")
    node = OttlaProcess(os.path.join(workdir, "data"), overrides=broker_config).start()
    phases = {"idempotent": None, "txn-100": 100, "txn-10k": 10_000}
    try:
        create_topics(node.bootstrap, list(phases), args.partitions)
        results = {name: run(node.bootstrap, name, args.size, args.partitions, args.seconds,
                             per_txn, args.min_commits if per_txn == 100 else 0)
                   for name, per_txn in phases.items()}
    finally:
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    ceiling = results["idempotent"]["mb_per_s"]
    settings = ", ".join(args.broker_config) or "defaults"
    print(f"{args.size} B records, acks=all, idempotent, {args.partitions} partition(s), "
          f"batch.size {PRODUCER['batch.size'] // MB} MiB, {args.seconds:g} s each; one node "
          f"on {os.cpu_count()} cores; broker settings: {settings}")
    print("| produce | records/s | MB/s | ratio to idempotent | transactions/s | "
          "begin to acked p50 / p99 ms | commit p50 / p99 / max ms | share of time in commit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        txn = (f"{r['txn_per_s']:,.1f} | {r['acked_p50_ms']:.1f} / {r['acked_p99_ms']:.1f} | "
               f"{r['commit_p50_ms']:.1f} / {r['commit_p99_ms']:.1f} / "
               f"{r['commit_max_ms']:.1f} | {r['commit_share']:.0%}"
               if "transactions" in r else "- | - | - | -")
        print(f"| {name} | {r['records_per_s']:,.0f} | {r['mb_per_s']:.1f} | "
              f"{r['mb_per_s'] / ceiling:.2f} | {txn} |")
    t = results["txn-100"]
    print(f"\ncommit_transaction, transactions of 100 records ({t['transactions']} commits): "
          f"p50 {t['commit_p50_ms']:.1f} ms, p99 {t['commit_p99_ms']:.1f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"size": args.size, "seconds": args.seconds,
                       "partitions": args.partitions, "broker_config": broker_config,
                       "cpus": os.cpu_count(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
