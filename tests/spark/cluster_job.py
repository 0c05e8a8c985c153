"""A user's job for the standalone-cluster tests, submitted as a user would:
``spark-submit --master spark://... --py-files ottla.zip cluster_job.py MODE ...``.

It imports nothing but PySpark and ``ottla`` (which reaches it, and the executors,
through ``--py-files``):

- ``batch``: topic -> ``upper(value)`` -> topic, ``format("ottla")`` both ways, saved in
  the default mode as code written for Spark's Kafka sink does.
- ``stream``: topic -> Parquet files (the file sink with a checkpoint), with
  ``Trigger.AvailableNow`` and ``maxOffsetsPerTrigger``; one task of micro-batch
  ``--hold-batch`` waits in a pass-through ``mapInArrow`` until the test, having killed
  the executor it runs in, releases it (``--gate``: a directory with the file ``armed``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import SparkSession

import ottla.spark


def hold_one_task(gate: str, batch_id: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A pass-through for ``mapInArrow`` in which the first task of micro-batch
    ``batch_id`` to get there (it takes ``<gate>/armed``) writes ``<gate>/held`` (its
    pid) after its first input batch and waits for ``<gate>/release``."""

    def passthrough(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        batches = iter(batches)
        first = next(batches, None)
        if TaskContext.get().getLocalProperty("streaming.sql.batchId") == batch_id:
            try:
                os.rename(os.path.join(gate, "armed"), os.path.join(gate, "taken"))
            except FileNotFoundError:
                pass  # another task of the batch, or a retry, after the gate was taken
            else:
                held = os.path.join(gate, "held")
                with open(held + ".tmp", "w") as f:
                    json.dump({"pid": os.getpid()}, f)
                os.rename(held + ".tmp", held)
                deadline = time.monotonic() + 120
                while not os.path.exists(os.path.join(gate, "release")):
                    if time.monotonic() > deadline:
                        raise TimeoutError("the test did not release the held task")
                    time.sleep(0.02)
        if first is not None:
            yield first
        yield from batches

    return passthrough


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["batch", "stream"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", help="batch: the output topic")
    parser.add_argument("--output", help="stream: the Parquet directory")
    parser.add_argument("--checkpoint", help="stream: the checkpoint directory")
    parser.add_argument("--max-offsets-per-trigger", default="4000")
    parser.add_argument("--gate", help="stream: the directory of the held task's files")
    parser.add_argument("--hold-batch", default="1")
    args = parser.parse_args()

    spark = SparkSession.builder.appName(f"ottla-cluster-{args.mode}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    ottla.spark.register(spark)
    source = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.source}
    if args.mode == "batch":
        records = spark.read.format("ottla").options(**source).load()
        (records.selectExpr("key", "upper(cast(value as string)) AS value")
         .write.format("ottla").option("kafka.bootstrap.servers", args.bootstrap)
         .option("topic", args.sink).save())
        print(json.dumps({"written": args.sink}))
    else:
        records = (spark.readStream.format("ottla").options(**source)
                   .option("startingOffsets", "earliest")
                   .option("maxOffsetsPerTrigger", args.max_offsets_per_trigger).load()
                   .select("key", "value", "partition", "offset"))
        held = records.mapInArrow(hold_one_task(args.gate, args.hold_batch), records.schema)
        query = (held.writeStream.format("parquet")
                 .option("path", args.output)
                 .option("checkpointLocation", args.checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        print(json.dumps({"batches": len(query.recentProgress),
                          "rows": sum(p["numInputRows"] for p in query.recentProgress)}))
    spark.stop()


if __name__ == "__main__":
    main()
