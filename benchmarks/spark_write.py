"""Writing a DataFrame to a topic with format("ottla"), against producing directly.

Against a real ``ottla server``, for each record size (100 B, 1 KiB, 16 KiB) the same
records (a decimal key, a value of ``size`` bytes) are written twice to fresh topics:

- the ceiling: confluent-kafka's producer in this process, one ``produce()`` per record
  with the sink's defaults (idempotent, acks=all), flushed;
- ``df.write.format("ottla").save()`` of a cached DataFrame holding those records
  (local[2], one task per topic partition), every record acknowledged when it returns;
- a write of one record per partition: what a Spark write job costs whatever it writes.

Each figure is printed with its ratio to the ceiling (the same bytes, so records/s and
MB/s ratios agree) and, for the Spark write, where the CPU went: the broker, Spark's JVM
and the Python workers, in CPU seconds (two cores: all three share them). The topic's
end offsets are checked against the record count after each write.

Run: ``python -m benchmarks.spark_write [--sizes 100,1024,16384] [--mb 128]
[--partitions 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.spark_read import CpuMeter, ends
from benchmarks.throughput import MB
from ottla.spark.producer_writer import producer_config

TARGET_VS_PRODUCER = 0.5  # issue 21: DataFrame write / confluent-kafka producing directly


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def direct(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Seconds for one confluent-kafka producer to write and flush every record."""
    producer = Producer(producer_config({"bootstrap.servers": bootstrap}))
    value = b"x" * size
    keys = [b"%d" % i for i in range(records)]  # as the DataFrame holds them, ready
    produce = producer.produce
    start = time.perf_counter()
    for key in keys:
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(300) == 0
    return time.perf_counter() - start


def dataframe(spark: Any, records: int, size: int, partitions: int) -> Any:
    df = spark.range(0, records, 1, partitions).selectExpr(
        "cast(cast(id as string) as binary) as key",
        f"cast(repeat('x', {size}) as binary) as value").cache()
    assert df.count() == records
    return df


def spark_write(df: Any, bootstrap: str, topic: str) -> float:
    start = time.perf_counter()
    (df.write.format("ottla").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())
    return time.perf_counter() - start


def run_size(spark: Any, node: Any, size: int, mb: int, partitions: int) -> dict[str, Any]:
    records = max(mb * MB // size, partitions)
    seconds: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    meter = CpuMeter(node.proc.pid)

    topic = f"spark-write-direct-{size}"
    create(node.bootstrap, topic, partitions)
    seconds["confluent-kafka produce (ceiling)"], cpu["confluent-kafka produce (ceiling)"] = \
        meter.measure(lambda: direct(node.bootstrap, topic, records, size))
    assert sum(ends(node.bootstrap, topic, partitions)) == records

    df = dataframe(spark, records, size, partitions)
    topic = f"spark-write-sink-{size}"
    create(node.bootstrap, topic, partitions)
    name = "spark df.write.format('ottla')"
    seconds[name], cpu[name] = meter.measure(lambda: spark_write(df, node.bootstrap, topic))
    assert sum(ends(node.bootstrap, topic, partitions)) == records
    df.unpersist()
    # What every Spark write job costs whatever it writes (planning and committing in
    # fresh Python workers, which import PySpark from its zip, compiling it): a job of
    # one record per partition.
    tiny = dataframe(spark, partitions, size, partitions)
    fixed = spark_write(tiny, node.bootstrap, topic)
    tiny.unpersist()
    ceiling = seconds["confluent-kafka produce (ceiling)"]
    return {"records": records, "size": size, "partitions": partitions,
            "fixed_job_seconds": fixed, "results": {
        name: {"seconds": took, "records_per_s": records / took,
               "mb_per_s": records * size / took / MB, "vs_producer": ceiling / took,
               "cpu_seconds": cpu.get(name)}
        for name, took in seconds.items()}}


def report(run: dict[str, Any]) -> None:
    print(f"\n{run['records']} records of {run['size']} B into {run['partitions']} "
          "partitions")
    print(f"{'writer':<38}{'records/s':>11}{'MB/s':>8}{'/direct':>9}"
          "   CPU s: broker, JVM, Python (workers; this process for direct)")
    for name, r in run["results"].items():
        c = r["cpu_seconds"]
        print(f"{name:<38}{r['records_per_s']:>11.0f}{r['mb_per_s']:>8.1f}"
              f"{r['vs_producer']:>9.2f}   {c['broker']:.1f}, {c['jvm']:.1f}, "
              f"{c['python workers']:.1f}")
    sink = run["results"]["spark df.write.format('ottla')"]
    direct_rate = run["results"]["confluent-kafka produce (ceiling)"]["records_per_s"]
    fixed = run["fixed_job_seconds"]
    beyond = run["records"] / max(sink["seconds"] - fixed, 1e-9)
    print(f"a Spark write job of 1 record per partition takes {fixed:.2f} s; beyond that, "
          f"the write ran at {beyond:.0f} records/s ({beyond * run['size'] / MB:.0f} MB/s, "
          f"{beyond / direct_rate:.2f} of producing directly)")
    print(f"target (issue 21): DataFrame write >= {TARGET_VS_PRODUCER:g} of producing "
          f"directly: {sink['vs_producer']:.2f}")


def main() -> None:
    from tests.helpers import OttlaProcess

    from ottla.spark.session import create_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,1024,16384",
                        help="record sizes in bytes, comma-separated")
    parser.add_argument("--mb", type=int, default=128, help="MiB of values per size")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--json", default="benchmarks/results/spark_write.json")
    args = parser.parse_args()

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        node = OttlaProcess(f"{tmp}/data").start()
        try:
            spark = create_session("ottla-bench", "local[2]",
                                   {"spark.sql.shuffle.partitions": "2"})
            spark.sparkContext.setLogLevel("ERROR")
            try:
                # The JVM's code paths and the Python workers, before anything is timed.
                warm = dataframe(spark, 2000, 100, args.partitions)
                create(node.bootstrap, "spark-write-warm-up", args.partitions)
                spark_write(warm, node.bootstrap, "spark-write-warm-up")
                for size in (int(s) for s in args.sizes.split(",")):
                    run = run_size(spark, node, size, args.mb, args.partitions)
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
