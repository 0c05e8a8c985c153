"""The driver that test_exactly_once kills: topic -> value + "!" -> topic, exactly once.

Run as its own process (``python tests/spark/exactly_once_driver.py ...``) so that the
test can ``kill -9`` it mid-batch and restart it from its checkpoint, as an operator's
crashed job would be. It reads with read_committed and writes with ``exactlyOnce=true``.
"""

from __future__ import annotations

import argparse

from ottla.spark.session import create_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--trigger", default="availableNow",
                        help="availableNow, or a processing-time interval")
    parser.add_argument("--max-offsets-per-trigger", default="1000")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()

    spark = create_session("ottla-exactly-once-driver", "local[2]", {
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.streaming.stopTimeout": "30s",
        # A short-lived JVM on a small machine: the C1 compiler alone and one GC thread
        # start a driver about a quarter faster, and the test starts four.
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    })
    spark.sparkContext.setLogLevel("ERROR")
    source = (spark.readStream.format("ottla")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("kafka.isolation.level", "read_committed")
              .option("subscribe", args.source)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
              .load())
    writer = (source.selectExpr("key", "concat(value, X'21') AS value")
              .writeStream.format("ottla")
              .option("kafka.bootstrap.servers", args.bootstrap)
              .option("topic", args.sink)
              .option("exactlyOnce", "true")
              .option("checkpointLocation", args.checkpoint))
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger)
    query = writer.start()
    try:
        finished = query.awaitTermination(args.timeout)
        if query.exception() is not None:
            raise SystemExit(f"the query failed: {query.exception()}")
        if not finished:
            raise SystemExit(f"the query did not finish within {args.timeout} s")
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
