"""A Spark Connect client for test_connect: ``python connect_client.py sc://... MODE ...``.

Its own process because a Connect session cannot share one with the classic session of
the other Spark tests (PySpark refuses a remote session beside an active SparkContext,
and once it made one it switches the process's ``pyspark.sql.functions`` to Connect).

- ``batch``: reads a topic (printing its rows as JSON), and writes ``upper(value)`` of
  it to another topic in the default save mode.
- ``stream``: topic -> Parquet files with ``Trigger.AvailableNow`` (prints the progress).
"""

from __future__ import annotations

import argparse
import json

from ottla.spark.session import create_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("remote")
    parser.add_argument("mode", choices=["batch", "stream"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", help="batch: the output topic")
    parser.add_argument("--output", help="stream: the Parquet directory")
    parser.add_argument("--checkpoint", help="stream: the checkpoint directory")
    args = parser.parse_args()

    spark = create_session("ottla-connect-test", remote=args.remote)
    try:
        source = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.source}
        if args.mode == "batch":
            records = spark.read.format("ottla").options(**source).load()
            rows = records.selectExpr("partition", "offset", "cast(key as string) AS key",
                                      "cast(value as string) AS value").collect()
            print(json.dumps({"type": type(spark).__module__,
                              "rows": [r.asDict() for r in rows]}))
            (records.selectExpr("key", "upper(cast(value as string)) AS value")
             .write.format("ottla").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.sink).save())
        else:
            query = (spark.readStream.format("ottla").options(**source)
                     .option("startingOffsets", "earliest")
                     .option("maxOffsetsPerTrigger", "300").load()
                     .select("partition", "offset", "value")
                     .writeStream.format("parquet").option("path", args.output)
                     .option("checkpointLocation", args.checkpoint)
                     .trigger(availableNow=True).start())
            finished = query.awaitTermination(120)
            print(json.dumps({"finished": finished,
                              "exception": str(query.exception() or "") or None}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
