"""Reading a topic into Spark with format("ottla"), against what is under it.

Against a real ``ottla server``, for each record size (100 B, 1 KiB, 16 KiB) a topic is
filled once, then read in the same run:

- the ceilings: a bare reader (``benchmarks.fetch_server``'s: one Fetch of 16 MiB in
  flight, received into one buffer, only the batch headers walked) fetching every
  partition in turn, which is what the broker can send; and confluent-kafka's Python
  consumer taking every record in this process (a Python object per record, as the
  ``consumer`` reader does);
- a Spark batch read into the ``noop`` sink with ``reader=consumer`` and with
  ``reader=columnar``, and a Structured Streaming read (``Trigger.AvailableNow``) into
  ``noop`` with the columnar reader.

Every figure is printed with its ratio to both ceilings (records/s, so MB/s ratios are
the same), and for the Spark reads where the CPU went: the broker, Spark's JVM and the
Python workers, in CPU seconds during the read (two cores: the three share them). A
Spark job has a fixed cost whatever it reads; the time of a read of one record per
partition is printed as well, with the columnar rate beyond it. Spark runs local[2],
each topic has ``--partitions`` partitions.

Run: ``python -m benchmarks.spark_read [--sizes 100,1024,16384] [--mb 256]
[--partitions 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import tempfile
import time
from collections.abc import Callable
from typing import Any

import psutil
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.fetch_server import FETCH_VERSION, PARTITION_MAX_BYTES, _next_offset, _records_span
from benchmarks.throughput import CONSUMER, MB, PRODUCER
from ottla.client.blocking import BlockingClient
from ottla.protocol.api import ApiKey

TARGET_SMALL_VS_CONSUMER = 5.0  # issue 21: 100 B records, columnar / Python consumer
TARGET_1K_VS_FETCH = 0.5  # issue 21: 1 KiB records, columnar / bare fetch (MB/s)


def topic_name(size: int) -> str:
    return f"spark-bench-{size}"


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench-ends"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def bare_fetch(bootstrap: str, topic: str, partition_ends: list[int]) -> float:
    """Seconds for benchmarks.fetch_server's bare reader to fetch every partition."""
    buf = bytearray(64 * MB)
    view = memoryview(buf)
    with BlockingClient(bootstrap) as client:
        start = time.perf_counter()
        for partition, end in enumerate(partition_ends):
            offset = 0
            while offset < end:
                client.send(ApiKey.FETCH, FETCH_VERSION, {
                    "replica_id": -1, "max_wait": 10, "min_bytes": 1, "max_bytes": 50 * MB,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "rack_id": "", "forgotten_topics_data": [], "topics": [{
                        "topic": topic, "partitions": [{
                            "partition": partition, "current_leader_epoch": -1,
                            "fetch_offset": offset, "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": PARTITION_MAX_BYTES}]}]})
                size = struct.unpack(">i", client._recv_exactly(4))[0]
                got = 0
                while got < size:
                    n = client.sock.recv_into(view[got:size])
                    if not n:
                        raise ConnectionError("the broker closed the connection")
                    got += n
                first, last = _records_span(buf)
                offset = _next_offset(buf, first, last, offset)
        return time.perf_counter() - start


def python_consumer(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """Seconds for confluent-kafka's Python consumer (tuned as benchmarks.throughput
    tunes it) to hand this process every record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench-direct",
                         **CONSUMER})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10000, 0.5) if not m.error())
    took = time.perf_counter() - start
    consumer.close()
    assert got == records, f"consumed {got} of {records}"
    return took


class CpuMeter:
    """CPU seconds of the broker, Spark's JVM and the Python workers over a section
    (children of this process, found by their command lines)."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid

    def _sample(self) -> dict[str, float]:
        totals = {"broker": 0.0, "jvm": 0.0, "python workers": 0.0}
        for proc in psutil.Process().children(recursive=True):
            try:
                cpu = proc.cpu_times()
                own = cpu.user + cpu.system
                if proc.pid == self.broker_pid:
                    totals["broker"] += own
                elif proc.name() == "java":
                    totals["jvm"] += own
                elif any("pyspark" in part for part in proc.cmdline()):
                    # The daemon also holds the time of the workers it forked and reaped.
                    parent = psutil.Process(proc.ppid())
                    forked = any("pyspark" in part for part in parent.cmdline())
                    totals["python workers"] += own if forked else \
                        own + cpu.children_user + cpu.children_system
            except psutil.Error:
                continue
        return totals

    def measure(self, run: Callable[[], float]) -> tuple[float, dict[str, float]]:
        before = self._sample()
        took = run()
        after = self._sample()
        return took, {k: after[k] - before[k] for k in before}


def spark_batch(spark: Any, bootstrap: str, topic: str, reader: str,
                ending: str = "latest") -> float:
    df = (spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("reader", reader)
          .option("endingOffsets", ending).load())
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def spark_stream(spark: Any, bootstrap: str, topic: str, checkpoint: str,
                 records: int) -> float:
    df = (spark.readStream.format("ottla").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    start = time.perf_counter()
    query = (df.writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    took = time.perf_counter() - start
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == records, f"streamed {rows} of {records}"
    in_batches[checkpoint] = sum(p["durationMs"].get("addBatch", 0)
                                 for p in query.recentProgress) / 1000
    return took


# Seconds inside the micro-batches (their addBatch) of each streaming run, by checkpoint:
# the rest of a query's time is starting and stopping it.
in_batches: dict[str, float] = {}


def warm_up(spark: Any, bootstrap: str, topic: str, partitions: int) -> None:
    """Start the JVM's code paths and the Python workers for both readers."""
    ending = json.dumps({topic: {str(p): 1000 for p in range(partitions)}})
    for reader in ("consumer", "columnar"):
        (spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("endingOffsets", ending)
         .option("reader", reader).load().write.format("noop").mode("overwrite").save())


def run_size(spark: Any, node: Any, size: int, mb: int, partitions: int,
             tmp: str) -> dict[str, Any]:
    topic = topic_name(size)
    records = max(mb * MB // size, partitions)
    fill(node.bootstrap, topic, records, size, partitions)
    partition_ends = ends(node.bootstrap, topic, partitions)
    assert sum(partition_ends) == records
    meter = CpuMeter(node.proc.pid)
    seconds: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    seconds["bare fetch (ceiling)"] = bare_fetch(node.bootstrap, topic, partition_ends)
    seconds["python consumer (ceiling)"] = python_consumer(node.bootstrap, topic, records,
                                                           partitions)
    for reader in ("consumer", "columnar"):
        name = f"spark batch, reader={reader}"
        seconds[name], cpu[name] = meter.measure(
            lambda reader=reader: spark_batch(spark, node.bootstrap, topic, reader))
    # What every Spark job costs whatever it reads (scheduling, planning, the Python
    # workers' round trips): a read of one record per partition.
    fixed = spark_batch(spark, node.bootstrap, topic, "columnar",
                        json.dumps({topic: {str(p): 1 for p in range(partitions)}}))
    name = "spark stream availableNow, columnar"
    seconds[name], cpu[name] = meter.measure(
        lambda: spark_stream(spark, node.bootstrap, topic, f"{tmp}/cp-{size}", records))
    fetch, python = seconds["bare fetch (ceiling)"], seconds["python consumer (ceiling)"]
    return {"records": records, "size": size, "partitions": partitions,
            "fixed_job_seconds": fixed,
            "stream_in_batches_seconds": in_batches[f"{tmp}/cp-{size}"], "results": {
        name: {"seconds": took, "records_per_s": records / took,
               "mb_per_s": records * size / took / MB, "vs_bare_fetch": fetch / took,
               "vs_python_consumer": python / took, "cpu_seconds": cpu.get(name)}
        for name, took in seconds.items()}}


def report(run: dict[str, Any]) -> None:
    size, records = run["size"], run["records"]
    print(f"\n{records} records of {size} B in {run['partitions']} partitions")
    print(f"{'reader':<38}{'records/s':>11}{'MB/s':>8}{'/fetch':>8}{'/python':>9}"
          f"   CPU s: broker, JVM, Python workers")
    for name, r in run["results"].items():
        cpu = r["cpu_seconds"]
        where = "" if cpu is None else \
            f"   {cpu['broker']:.1f}, {cpu['jvm']:.1f}, {cpu['python workers']:.1f}"
        print(f"{name:<38}{r['records_per_s']:>11.0f}{r['mb_per_s']:>8.1f}"
              f"{r['vs_bare_fetch']:>8.2f}{r['vs_python_consumer']:>9.2f}{where}")
    columnar = run["results"]["spark batch, reader=columnar"]
    fixed = run["fixed_job_seconds"]
    beyond = records / max(columnar["seconds"] - fixed, 1e-9)
    fetch = run["results"]["bare fetch (ceiling)"]["records_per_s"]
    print(f"a Spark batch job reading 1 record per partition takes {fixed:.2f} s; beyond "
          f"that, the columnar read ran at {beyond:.0f} records/s "
          f"({beyond * size / MB:.0f} MB/s, {beyond / fetch:.2f} of the bare fetch)")
    stream = run["results"]["spark stream availableNow, columnar"]
    inside = run["stream_in_batches_seconds"]
    print(f"the streaming query took {stream['seconds']:.2f} s, of which "
          f"{stream['seconds'] - inside:.2f} s starting and stopping it; within its "
          f"micro-batches it read {records / max(inside, 1e-9):.0f} records/s")
    if size <= 100:
        print(f"target (issue 21): columnar >= {TARGET_SMALL_VS_CONSUMER:g} x the Python "
              f"consumer: {columnar['vs_python_consumer']:.2f}")
    if size == 1024:
        print(f"target (issue 21): columnar >= {TARGET_1K_VS_FETCH:g} of the bare fetch "
              f"rate: {columnar['vs_bare_fetch']:.2f}")


def main() -> None:
    from tests.helpers import OttlaProcess

    from ottla.spark.session import create_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1024,16384",
                        help="record sizes in bytes, comma-separated")
    parser.add_argument("--mb", type=int, default=256, help="MiB of values per size")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", default="benchmarks/results/spark_read.json")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable)")
    args = parser.parse_args()
    conf = dict(c.split("=", 1) for c in args.conf)
    sizes = [int(s) for s in args.sizes.split(",")]

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        node = OttlaProcess(f"{tmp}/data").start()
        try:
            spark = create_session("ottla-bench", "local[2]",
                                   {"spark.sql.shuffle.partitions": "2", **conf})
            spark.sparkContext.setLogLevel("ERROR")
            try:
                for i, size in enumerate(sizes):
                    if i == 0:
                        fill(node.bootstrap, "spark-bench-warm-up", 4000, size,
                             args.partitions)
                        warm_up(spark, node.bootstrap, "spark-bench-warm-up", args.partitions)
                    run = run_size(spark, node, size, args.mb, args.partitions, tmp)
                    report(run)
                    runs.append(run)
            finally:
                spark.stop()
        finally:
            node.stop()
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
