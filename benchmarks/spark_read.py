"""Reading a topic into Spark with format("ottla"), against consuming it directly.

Against a real ``ottla server``, the topic is filled once, then read three ways in the
same run: confluent-kafka consuming every partition in this process (the ceiling: what
the client library delivers before Spark is involved), a Spark batch read into the
``noop`` sink, and a Structured Streaming read (Trigger.AvailableNow) into the ``noop``
sink. Spark runs local[2] on the machine's two cores, sharing them with the broker.

Run: ``python -m benchmarks.spark_read [--records 500000] [--size 100] [--partitions 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1024 * 1024
TOPIC = "spark-bench"


def fill(bootstrap: str, records: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def direct(bootstrap: str, records: int, partitions: int) -> float:
    """Seconds for one confluent-kafka consumer to receive every record (the ceiling)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench-direct",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10000, 0.5) if not m.error())
    took = time.perf_counter() - start
    consumer.close()
    assert got == records, f"consumed {got} of {records}"
    return took


def spark_batch(spark: Any, bootstrap: str) -> float:
    df = (spark.read.format("ottla").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", TOPIC).load())
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def spark_stream(spark: Any, bootstrap: str, checkpoint: str, records: int) -> float:
    df = (spark.readStream.format("ottla").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", TOPIC).option("startingOffsets", "earliest").load())
    start = time.perf_counter()
    query = (df.writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    took = time.perf_counter() - start
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == records, f"streamed {rows} of {records}"
    return took


def main() -> None:
    from tests.helpers import OttlaProcess

    from ottla.spark.session import create_session

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", default="benchmarks/results/spark_read.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        node = OttlaProcess(f"{tmp}/data").start()
        try:
            fill(node.bootstrap, args.records, args.size, args.partitions)
            ceiling = direct(node.bootstrap, args.records, args.partitions)
            spark = create_session("ottla-bench", "local[2]",
                                   {"spark.sql.shuffle.partitions": "2"})
            spark.sparkContext.setLogLevel("ERROR")
            try:
                spark_batch(spark, node.bootstrap)  # warm up the JVM and Python workers
                batch = spark_batch(spark, node.bootstrap)
                stream = spark_stream(spark, node.bootstrap, f"{tmp}/cp", args.records)
            finally:
                spark.stop()
        finally:
            node.stop()

    mb = args.records * args.size / MB
    results = {name: {"seconds": took, "records_per_s": args.records / took,
                      "mb_per_s": mb / took, "ratio": ceiling / took}
               for name, took in (("confluent-kafka direct (ceiling)", ceiling),
                                  ("spark batch read -> noop", batch),
                                  ("spark streaming availableNow -> noop", stream))}
    print(f"{args.records} records of {args.size} B in {args.partitions} partitions")
    print(f"{'reader':<40}{'records/s':>12}{'MB/s':>9}{'ratio':>8}")
    for name, r in results.items():
        print(f"{name:<40}{r['records_per_s']:>12.0f}{r['mb_per_s']:>9.1f}{r['ratio']:>8.3f}")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"records": args.records, "size": args.size,
                   "partitions": args.partitions, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
