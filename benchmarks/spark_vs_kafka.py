"""Spark reading the same topic from Apache Kafka 4.4 and from Ottla, beside Spark's own
Parquet scan of the same rows.

One topic (``--records`` records of ``--size`` bytes, ``--partitions`` partitions, the
same keys and values) is written to an Ottla node and read into Spark's ``noop`` sink by

- Ottla's source, ``format("ottla")`` (the columnar reader), batch and streaming
  (``Trigger.AvailableNow``);
- Spark's own Kafka connector, ``format("kafka")`` (spark-sql-kafka-0-10, from Maven
  by ``make kafka-ref``), against the same Ottla node, batch and streaming;

then the Ottla node is stopped, the same topic is written to an Apache Kafka 4.4 node
and read by Spark's connector again, batch and streaming: the figure the others are
read against. The ceiling is Spark reading the same rows (key, value, topic, partition,
offset, timestamp) from Parquet files in one local directory, written once from the
Ottla read. Spark runs ``local[2]`` on the same two cores as the broker; each read is
the median of ``--repeat``, after one read of the same kind to warm the JVM.

Run: ``python -m benchmarks.spark_vs_kafka [--records 500000] [--size 1024]
[--partitions 4] [--repeat 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.spark_read import ends, fill
from benchmarks.throughput import MB
from benchmarks.vs_kafka import KAFKA_JVM_OPTS


@contextmanager
def broker(system: str, root: Path) -> Iterator[str]:
    """A node of ``system`` ("ottla" or "kafka") while it runs: its bootstrap."""
    if system == "ottla":
        from tests.helpers import OttlaProcess

        (root / "ottla").mkdir(parents=True, exist_ok=True)
        node = OttlaProcess(str(root / "ottla" / "data")).start()
        try:
            yield node.bootstrap
        finally:
            node.stop()
        return
    from tests.kafka_ref.cluster import single_node

    cluster = single_node(root / "kafka")
    cluster.nodes[1].jvm_opts = KAFKA_JVM_OPTS
    cluster.start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()


def batch(spark: Any, source: str, bootstrap: str, topic: str) -> Callable[[], float]:
    def run() -> float:
        reader = (spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest"))
        if source == "ottla":
            reader = reader.option("reader", "columnar")
        start = time.perf_counter()
        reader.load().write.format("noop").mode("overwrite").save()
        return time.perf_counter() - start
    return run


def stream(spark: Any, source: str, bootstrap: str, topic: str, checkpoints: Path,
           records: int) -> Callable[[], float]:
    """An AvailableNow query from the earliest offsets, each run with a new checkpoint."""

    def run() -> float:
        df = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
        start = time.perf_counter()
        query = (df.writeStream.format("noop")
                 .option("checkpointLocation", str(checkpoints / uuid.uuid4().hex))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        took = time.perf_counter() - start
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert rows == records, f"{source} streamed {rows} of {records}"
        return took
    return run


def parquet(spark: Any, path: Path) -> Callable[[], float]:
    def run() -> float:
        start = time.perf_counter()
        spark.read.parquet(str(path)).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - start
    return run


def median_seconds(run: Callable[[], float], repeat: int) -> float:
    run()  # warm-up: the JVM's code paths and the Python workers
    return statistics.median(run() for _ in range(repeat))


def main() -> None:
    from tests.kafka_ref.spark_kafka import install as install_connector

    from ottla.spark.session import create_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    topic, records = "spark-vs-kafka", args.records
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ottla-spark-vs-kafka-") as tmp:
        root = Path(tmp)
        spark = create_session("ottla-spark-vs-kafka", "local[2]", {
            "spark.jars": ",".join(str(j) for j in install_connector()),
            "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
            "spark.local.dir": str(root / "spark-local")})
        spark.sparkContext.setLogLevel("ERROR")
        try:
            with broker("ottla", root) as bootstrap:
                fill(bootstrap, topic, records, args.size, args.partitions)
                assert sum(ends(bootstrap, topic, args.partitions)) == records
                (spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", topic).load()
                 .write.parquet(str(root / "rows.parquet")))
                for source in ("ottla", "kafka"):
                    seconds[f"format({source!r}) on Ottla, batch"] = median_seconds(
                        batch(spark, source, bootstrap, topic), args.repeat)
                    seconds[f"format({source!r}) on Ottla, stream"] = median_seconds(
                        stream(spark, source, bootstrap, topic, root / "cp", records),
                        args.repeat)
            seconds["Parquet scan of the same rows (ceiling)"] = median_seconds(
                parquet(spark, root / "rows.parquet"), args.repeat)
            with broker("kafka", root) as bootstrap:
                fill(bootstrap, topic, records, args.size, args.partitions)
                seconds["format('kafka') on Kafka 4.4, batch"] = median_seconds(
                    batch(spark, "kafka", bootstrap, topic), args.repeat)
                seconds["format('kafka') on Kafka 4.4, stream"] = median_seconds(
                    stream(spark, "kafka", bootstrap, topic, root / "cp", records),
                    args.repeat)
        finally:
            spark.stop()
    ceiling = seconds["Parquet scan of the same rows (ceiling)"]
    figures = {name: {"seconds": took, "records_per_s": records / took,
                      "mb_per_s": records * args.size / took / MB,
                      "vs_parquet": ceiling / took} for name, took in seconds.items()}
    for kind in ("batch", "stream"):
        on_kafka = seconds[f"format('kafka') on Kafka 4.4, {kind}"]
        for name, took in seconds.items():
            if name.endswith(kind):
                figures[name]["vs_kafka_on_kafka"] = on_kafka / took
    print(f"{records} records of {args.size} B in {args.partitions} partitions, Spark "
          f"local[2]; median of {args.repeat} reads after a warm-up")
    print(f"{'read':<44}{'records/s':>11}{'MB/s':>8}{'/parquet':>10}{'/kafka':>8}")
    for name, f in figures.items():
        versus = f.get("vs_kafka_on_kafka")
        print(f"{name:<44}{f['records_per_s']:>11.0f}{f['mb_per_s']:>8.1f}"
              f"{f['vs_parquet']:>10.2f}{'' if versus is None else f'{versus:>8.2f}'}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as out:
            json.dump({"records": records, "size": args.size,
                       "partitions": args.partitions, "figures": figures}, out, indent=2)


if __name__ == "__main__":
    main()
