"""Topic archive: records -> Parquet files partitioned by date, incrementally.

The Parquet file sink is exactly once with its checkpoint: a run reads from where the
last committed micro-batch ended, so running it from cron with the default
``--trigger availableNow`` archives each record once, and a killed run resumes.
"""

from __future__ import annotations

import argparse
from typing import Any

from ottla.spark.pipelines.common import (
    add_source_arguments,
    add_stream_arguments,
    source_options,
    start,
)

HELP = "topic -> Parquet files partitioned by date, incremental via the checkpoint"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser, "a topic to archive (repeatable)")
    add_stream_arguments(parser)
    parser.add_argument("--output", required=True, help="the Parquet directory")


def run(spark: Any, args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    options = source_options(args)
    options.setdefault("includeHeaders", "true")
    records = (spark.readStream.format("ottla").options(**options).load()
               .withColumn("date", F.to_date("timestamp")))
    writer = (records.writeStream.format("parquet")
              .option("path", args.output)
              .option("checkpointLocation",
                      args.checkpoint or args.output.rstrip("/") + "-checkpoint")
              .partitionBy("date"))
    return start(writer, args)
